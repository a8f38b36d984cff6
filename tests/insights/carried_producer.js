// kafkajs producer for make_insight_captures.py's `carried` scenario: reads
// {"bootstrap", "clientId", "messages": [{"topic", "key", "value_hex", "headers": {name: value}}]}
// on stdin, sends each message alone (acks all) and prints, per message, the offset the broker
// gave it and the time it was sent, as JSON lines.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const spec = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const kafka = new Kafka({ clientId: spec.clientId, brokers: [spec.bootstrap], logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ allowAutoTopicCreation: false });
  await producer.connect();
  for (const m of spec.messages) {
    const sent = Date.now() / 1000;
    const out = await producer.send({
      topic: m.topic, acks: -1,
      messages: [{ key: m.key, value: Buffer.from(m.value_hex, "hex"), headers: m.headers }],
    });
    console.log(JSON.stringify({ topic: out[0].topicName, partition: out[0].partition,
                                 offset: Number(out[0].baseOffset), sent }));
  }
  await producer.disconnect();
}

main().catch((e) => { console.error(e); process.exit(1); });
