// kafkajs client for make_insight_captures.py's `clients` scenario: reads
// {"bootstrap", "prefix", "topic", "n"} on stdin; a producer (client id PREFIX-producer) sends n
// records, then a consumer in a group (client id PREFIX-consumer) reads them back.
const { Kafka, logLevel } = require("kafkajs");

async function main() {
  const spec = JSON.parse(require("fs").readFileSync(0, "utf8"));
  const mk = (id) => new Kafka({ clientId: id, brokers: [spec.bootstrap], logLevel: logLevel.NOTHING });
  const producer = mk(`${spec.prefix}-producer`).producer({ allowAutoTopicCreation: false });
  await producer.connect();
  for (let i = 0; i < spec.n; i++) {
    await producer.send({ topic: spec.topic, acks: -1, messages: [{ key: `k${i}`, value: `v${i}` }] });
  }
  await producer.disconnect();
  const consumer = mk(`${spec.prefix}-consumer`).consumer({ groupId: `${spec.prefix}-group` });
  await consumer.connect();
  await consumer.subscribe({ topic: spec.topic, fromBeginning: true });
  let got = 0;
  await new Promise((resolve) => {
    const timer = setTimeout(resolve, 30000);
    consumer.run({ eachMessage: async () => { got += 1; if (got >= spec.n) { clearTimeout(timer); resolve(); } } });
  });
  await consumer.disconnect();
  console.log(JSON.stringify({ consumed: got }));
}

main().catch((e) => { console.error(e); process.exit(1); });
