"""Security: SASL and TLS as the wire shows them."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .. import protocol
from ..decode.status import SASL_TOKEN
from ..protocol import SASL_APIS as SASL
from ..tls.suites import SUITES
from .base import CONN, Audit, Policy, Results, Rows, Verdict, connections, ex_time, found, listener


#: the suites whose records an AEAD cipher protects (tls/suites.py): any other is flagged weak
AEAD_SUITES = sorted(s.name for s in SUITES.values() if s.aead)


def security(rows: Rows, policy: Policy) -> dict[str, DataFrame]:
    """SASL mechanisms per listener; SASL PLAIN on connections that are not TLS (credentials
    readable on the wire: flagged, never stored); clients that never authenticate on a listener
    where others do."""
    ex = (ex_time(rows.exchanges).where(F.col("api_key").isNotNull() | (F.col("status") == SASL_TOKEN))
          .withColumn("listener", listener()))
    # a connection once, whichever files or nights its exchanges came from (its date: its first's)
    # credentials on the wire: a SaslAuthenticate request, or a raw token after SaslHandshake v0
    sent = (F.col("api_key") == protocol.SASL_AUTHENTICATE_KEY) | (F.col("status") == SASL_TOKEN)
    per_conn = (ex.groupBy(*CONN, "listener")
                .agg(F.min("capture_date").alias("capture_date"),
                     F.max("sasl_mechanism").alias("sasl_mechanism"), F.max("sasl_user").alias("sasl_user"),
                     F.max("client_id").alias("client_id"),
                     F.max(F.coalesce(sent, F.lit(False))).alias("credentials_sent"),
                     F.array_sort(F.collect_set("api_name")).alias("apis"),
                     # a login's outcome: SaslHandshake or SaslAuthenticate answered with an error
                     # failed; SaslAuthenticate answered without one, or raw tokens (SaslHandshake v0)
                     # followed by other Kafka requests, succeeded
                     F.max(F.coalesce(F.col("api_key").isin(*SASL) & (F.col("error_code") != 0), F.lit(False)))
                     .alias("login_failed"),
                     F.max(F.coalesce((F.col("api_key") == protocol.SASL_AUTHENTICATE_KEY) & (F.col("error_code") == 0),
                                      F.lit(False)))
                     .alias("login_answered"),
                     F.max(F.col("status") == SASL_TOKEN).alias("raw_tokens"),
                     F.max(F.coalesce(~F.col("api_key").isin(*SASL, protocol.API_VERSIONS_KEY), F.lit(False)))
                     .alias("other_requests")))
    succeeded = ~F.col("login_failed") & (F.col("login_answered") | (F.col("raw_tokens") & F.col("other_requests")))
    mech = (per_conn.groupBy("capture_date", "listener")
            .agg(F.array_sort(F.collect_set("sasl_mechanism")).alias("sasl_mechanisms"),
                 F.count("*").alias("kafka_connections"),
                 F.sum(F.when(F.col("sasl_mechanism").isNotNull(), 1).otherwise(0)).alias("login_attempts"),
                 F.sum(F.when(F.col("sasl_mechanism").isNotNull() & succeeded, 1).otherwise(0)).alias("authenticated"),
                 F.sum(F.when(F.col("login_failed"), 1).otherwise(0)).alias("failed_logins"))
            .orderBy("listener"))
    conns = rows.connections.withColumn("listener", listener()).withColumn("capture_date", F.to_date("first_time"))
    tls_conns = conns.where(F.col("protocol") == "tls")
    tls = tls_conns.groupBy("capture_date", "listener").agg(connections().alias("tls_connections"))
    mech = mech.join(tls, ["capture_date", "listener"], "full").na.fill(
        0, ["tls_connections", "kafka_connections", "login_attempts", "authenticated", "failed_logins"])
    # a PLAIN login is readable on the wire where the connection is not TLS (a TLS connection is
    # decoded as Kafka too where its key log was given), once credentials were sent (a handshake the
    # broker never answered, with no token after it, is not)
    encrypted = tls_conns.select(*CONN, "listener").distinct()
    plain = (per_conn.where((F.col("sasl_mechanism") == "PLAIN") & F.col("credentials_sent"))
             .join(encrypted, [*CONN, "listener"], "left_anti")
             .groupBy("capture_date", "listener", "client_ip", "client_id", "sasl_user")
             .agg(F.count("*").alias("connections"))
             .orderBy("listener", "client_ip"))
    with_auth = per_conn.where(F.col("sasl_mechanism").isNotNull()).select("capture_date", "listener").distinct()
    unauth = (per_conn.where(F.col("sasl_mechanism").isNull())
              .join(with_auth, ["capture_date", "listener"])
              .groupBy("capture_date", "listener", "client_ip", "client_id")
              .agg(F.count("*").alias("connections"), F.array_sort(F.array_distinct(F.flatten(F.collect_list("apis"))))
                   .alias("apis"))
              .orderBy("listener", "client_ip"))
    # TLS: versions and suites per client and listener, weak ones flagged
    # (a suite not among tls/suites.py's, named by its number: not known to be AEAD, so flagged)
    weak = F.col("tls_version").isin("SSL 3.0", "TLS 1.0", "TLS 1.1") | ~F.col("tls_cipher").isin(AEAD_SUITES)
    tls_versions = (tls_conns.groupBy("capture_date", "listener", "client_ip", "tls_version", "tls_cipher", "tls_ja3",
                                     "tls_ja4")
                    .agg(connections().alias("connections"))
                    .withColumn("weak", F.coalesce(weak, F.lit(False)))
                    .orderBy("listener", "client_ip", "tls_version"))
    certs = (tls_conns.where(F.col("tls_cert_not_after").isNotNull())
             .groupBy("capture_date", "listener", "tls_cert_subject", "tls_cert_issuer", "tls_cert_not_after")
             .agg(connections().alias("connections"))
             .withColumn("days_left", F.datediff(F.to_date("tls_cert_not_after"), F.current_date()))
             .withColumn("expiring", F.col("days_left") < F.lit(policy.min_certificate_days))
             .orderBy("days_left"))
    # clients that use TLS somewhere and also talk plaintext Kafka to a listener
    by_client = conns.where(F.col("protocol").isin("tls", "kafka")).groupBy("capture_date", "client_ip") \
        .agg(F.collect_set("protocol").alias("protocols"))
    both = by_client.where(F.array_contains("protocols", "tls") & F.array_contains("protocols", "kafka"))
    mixed = (conns.where(F.col("protocol") == "kafka").join(both.select("capture_date", "client_ip"),
                                                            ["capture_date", "client_ip"])
             .groupBy("capture_date", "client_ip", "listener").agg(connections().alias("plaintext_connections"))
             .orderBy("client_ip", "listener"))
    return {"sasl_mechanisms": mech, "plain_without_tls": plain, "unauthenticated": unauth,
            "tls_versions": tls_versions, "certificates": certs, "plaintext_beside_tls": mixed}


def verdicts(results: Results, policy: Policy) -> list[Verdict]:
    out = []
    tables = results["security"]
    if not policy.allow_plain_without_tls:
        who = sorted({f"{r['client_id']}@{r['client_ip']} -> {r['listener']} "
                      f"(user {r['sasl_user'] if r['sasl_user'] is not None else 'not captured'})"
                      for r in tables["plain_without_tls"]})
        out.append(Verdict("no SASL PLAIN login outside TLS", not who, found(who),
                           "plaintext"))
    if not policy.allow_weak_tls:
        weak = sorted({f"{r['client_ip']} -> {r['listener']}: {r['tls_version']} {r['tls_cipher']}"
                       for r in tables["tls_versions"] if r["weak"]})
        seen = bool(tables["tls_versions"])
        out.append(Verdict("no TLS 1.0/1.1 or suite without AEAD", not weak,
                           found(weak) if seen else "not applicable: no TLS seen", "handshakes", applies=seen))
    soon = sorted({f"{r['listener']}: {r['tls_cert_subject']} until {r['tls_cert_not_after']}"
                   for r in tables["certificates"]
                   if r["days_left"] is not None and r["days_left"] < policy.min_certificate_days})
    certs = bool(tables["certificates"])
    n = len({(r["listener"], r["tls_cert_subject"], r["tls_cert_not_after"]) for r in tables["certificates"]})
    held = f"{n} server certificate{'s' if n != 1 else ''} seen, none expiring"
    out.append(Verdict(f"no server certificate expires within {policy.min_certificate_days} days", not soon,
                       (found(soon) if soon else held) if certs else "not applicable: no server certificate seen",
                       "certificates", applies=certs))
    return out


AUDIT = Audit(
    name="security", order=80, run=security,
    intro=('SASL mechanisms per listener; SASL PLAIN logins on connections that are not TLS (the '
           'password crosses the network readable; it is never stored here); clients that never '
           'authenticate on a listener where others do; TLS versions, suites and client fingerprints '
           '(JA3, JA4) per client and listener, TLS 1.0/1.1 and suites without AEAD flagged; server '
           'certificates by days left; clients that use TLS and also plaintext Kafka.'),
    verdicts=verdicts)
