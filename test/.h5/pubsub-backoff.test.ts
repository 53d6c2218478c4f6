// H5 scratch: does Google's Pub/Sub emulator honour a subscription's retry policy (minimumBackoff) on a nack?
import { v1 } from '@google-cloud/pubsub';
import { inject, it } from 'vitest';
import { requireEndpoints } from '../support/global-setup.js';
import { pubsubClient } from '../gcp/clients.js';

it('measures redelivery after nack with minimumBackoff 5 s', async () => {
  const e = requireEndpoints(inject('emulators'), 'gcp');
  const pubsub = pubsubClient(e);
  const ns = `h5b${Date.now() % 1e6}`;
  const [dead] = await pubsub.createTopic(`${ns}-dead`);
  const [topic] = await pubsub.createTopic(ns);
  const [sub] = await topic.createSubscription(`${ns}-sub`, {
    ackDeadlineSeconds: 10,
    retryPolicy: { minimumBackoff: { seconds: 5 }, maximumBackoff: { seconds: 20 } },
    deadLetterPolicy: { deadLetterTopic: dead.name, maxDeliveryAttempts: 5 },
  });
  const { servicePath, port, sslCreds } = pubsub.options;
  const subscriber = new v1.SubscriberClient({ ...(servicePath ? { servicePath } : {}), ...(port ? { port: Number(port) } : {}), ...(sslCreds ? { sslCreds } : {}) });
  const [meta] = await sub.getMetadata();
  console.log('H5 retryPolicy', JSON.stringify(meta.retryPolicy));
  await topic.publishMessage({ data: Buffer.from('x') });
  const t0 = Date.now();
  const seen: string[] = [];
  while (Date.now() - t0 < 40_000 && seen.length < 4) {
    const [r] = await subscriber.pull({ subscription: sub.name, maxMessages: 1, returnImmediately: true });
    for (const m of r.receivedMessages ?? []) {
      seen.push(`${((Date.now() - t0) / 1000).toFixed(1)}s attempt ${m.deliveryAttempt}`);
      await subscriber.modifyAckDeadline({ subscription: sub.name, ackIds: [m.ackId as string], ackDeadlineSeconds: 0 });
    }
    await new Promise((res) => setTimeout(res, 200));
  }
  console.log('H5 redeliveries', JSON.stringify(seen));
  await subscriber.close();
  await pubsub.close();
}, 60_000);
