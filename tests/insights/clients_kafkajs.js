// kafkajs client for make_insight_captures.py's `clients` and `fingerprints` scenarios: reads
// {"bootstrap", "prefix", "topic", "n"} on stdin, and optionally "producer", "consumer" and "send"
// (kafkajs options: a setting other than the default) and "gapMs" (a pause between records), "lingerMs" (the
// consumer goes on fetching so long after its last record); a
// producer (client id PREFIX-producer) sends n records one at a time, then a consumer in a group
// (client id PREFIX-consumer) reads them back.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const spec = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const mk = (id) => new Kafka({ clientId: id, brokers: spec.bootstrap.split(","), logLevel: logLevel.NOTHING });
  const producer = mk(`${spec.prefix}-producer`).producer({ allowAutoTopicCreation: false, ...(spec.producer || {}) });
  const send = { ...(spec.send || {}) };
  if (send.compression === "gzip") send.compression = require("kafkajs").CompressionTypes.GZIP;
  await producer.connect();
  for (let i = 0; i < spec.n; i++) {
    await producer.send({ topic: spec.topic, acks: -1, ...send, messages: [{ key: `k${i}`, value: `v${i}` }] });
    if (spec.gapMs) await new Promise((r) => setTimeout(r, spec.gapMs));
  }
  await producer.disconnect();
  const consumer = mk(`${spec.prefix}-consumer`).consumer({ groupId: `${spec.prefix}-group`, ...(spec.consumer || {}) });
  await consumer.connect();
  await consumer.subscribe({ topic: spec.topic, fromBeginning: true });
  let got = 0;
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 30000);
    const done = () => { clearTimeout(timer); setTimeout(resolve, spec.lingerMs || 0); };
    consumer.run({ eachMessage: async () => { got += 1; if (got === spec.n) done(); } });
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ consumed: got }));
}

main().catch((e) => { console.error(e); process.exit(1); });
