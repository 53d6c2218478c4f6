import { describe, expect, it } from 'vitest';
import { decodeMessageText, encodeMessageText } from '../../functions/azure/adapters/azure-queue-job-queue.js';
import { AdapterError } from '../../shared/domain/errors.js';
import type { JobMessage } from '../../shared/ports/job-queue.port.js';
import { freshJobId } from '../support/ids.js';
import { freshQueue } from './azurite.js';

const message = (label: string, extra = ''): JobMessage => {
  const jobKey = freshJobId(label);
  return { jobKey, body: JSON.stringify({ v: 1, jobKey, note: `Zürich + 日本 ${extra}` }) };
};

describe('AzureQueueJobQueue', () => {
  describe('sendBatch', () => {
    it('stores each body as base64 of its UTF-8 text, as the Functions host decodes it', async () => {
      const { queue, service } = await freshQueue();
      const m = message('b64');
      await queue.sendBatch([m]);
      const [raw] = (await service.getQueueClient(queue.queueName).peekMessages()).peekedMessageItems;
      expect(raw?.messageText).toBe(Buffer.from(m.body, 'utf8').toString('base64'));
      expect(decodeMessageText(raw?.messageText ?? '')).toBe(m.body);
    });

    it('sends every message of a batch larger than its send concurrency', async () => {
      const { queue } = await freshQueue();
      const sent = Array.from({ length: 40 }, (_, i) => message(`many${i}`));
      await queue.sendBatch(sent);
      const got = [...(await queue.receive(32, 30_000)), ...(await queue.receive(32, 30_000))];
      expect(got.map((d) => d.jobKey).sort()).toEqual(sent.map((m) => m.jobKey).sort());
    });

    it('refuses a message over the 64 KiB Storage Queue limit before sending anything', async () => {
      const { queue } = await freshQueue();
      const small = message('small');
      await expect(queue.sendBatch([small, message('huge', 'x'.repeat(50_000))])).rejects.toBeInstanceOf(AdapterError);
      expect(await queue.receive(32, 1000)).toEqual([]);
    });
  });

  describe('receive, ack and release', () => {
    it('delivers a message with its job key, body and receive count, and ack removes it', async () => {
      const { queue } = await freshQueue();
      const m = message('ack');
      await queue.sendBatch([m]);
      const [d] = await queue.receive(10, 30_000);
      expect(d).toMatchObject({ jobKey: m.jobKey, body: m.body, receiveCount: 1 });
      if (!d) throw new Error('no delivery');
      await queue.ack(d);
      expect(await queue.receive(10, 1000)).toEqual([]);
    });

    it('hides a received message for the visibility timeout', async () => {
      const { queue } = await freshQueue();
      await queue.sendBatch([message('hidden')]);
      expect(await queue.receive(10, 30_000)).toHaveLength(1);
      expect(await queue.receive(10, 30_000)).toHaveLength(0);
    });

    it('redelivers a released message under the same delivery id with a higher receive count', async () => {
      const { queue } = await freshQueue();
      await queue.sendBatch([message('release')]);
      const [first] = await queue.receive(1, 30_000);
      if (!first) throw new Error('no delivery');
      await queue.release(first);
      const [second] = await queue.receive(1, 30_000);
      expect(second).toMatchObject({ deliveryId: first.deliveryId, receiveCount: 2, body: first.body });
    });

    it('keeps a message released with a delay invisible until the delay has passed', async () => {
      const { queue } = await freshQueue();
      await queue.sendBatch([message('delay')]);
      const [d] = await queue.receive(1, 30_000);
      if (!d) throw new Error('no delivery');
      await queue.release(d, 2000);
      expect(await queue.receive(1, 30_000)).toHaveLength(0);
      await new Promise((r) => setTimeout(r, 2500));
      expect(await queue.receive(1, 30_000)).toHaveLength(1);
    });

    it('refuses to settle a delivery twice', async () => {
      const { queue } = await freshQueue();
      await queue.sendBatch([message('twice')]);
      const [d] = await queue.receive(1, 30_000);
      if (!d) throw new Error('no delivery');
      await queue.ack(d);
      await expect(queue.ack(d)).rejects.toBeInstanceOf(AdapterError);
    });
  });

  describe('poison messages, as the Functions host handles them', () => {
    it('moves a message to <queue>-poison when its 5th attempt fails, and never delivers it again', async () => {
      const { queue } = await freshQueue();
      const m = message('poison');
      await queue.sendBatch([m]);
      const counts: number[] = [];
      for (let attempt = 1; attempt <= 5; attempt++) {
        const [d] = await queue.receive(1, 30_000);
        if (!d) throw new Error(`attempt ${attempt} got no delivery`);
        counts.push(d.receiveCount);
        await queue.release(d);
      }
      expect(counts).toEqual([1, 2, 3, 4, 5]);
      expect(await queue.receive(1, 30_000)).toEqual([]);
      expect(await queue.deadLetters()).toEqual([m]);
      expect(queue.poisonQueueName).toBe(`${queue.queueName}-poison`);
    });

    it('poisons on sight a message whose earlier attempts died without settling it', async () => {
      const { queue } = await freshQueue('tiles', 2);
      const m = message('crashed');
      await queue.sendBatch([m]);
      // Two receivers "crash": they never ack or release, the visibility timeout returns the message.
      for (let attempt = 1; attempt <= 2; attempt++) {
        expect(await queue.receive(1, 1000)).toHaveLength(1);
        await new Promise((r) => setTimeout(r, 1300));
      }
      expect(await queue.receive(1, 30_000)).toEqual([]);
      expect(await queue.deadLetters()).toEqual([m]);
    });

    it('lists more than 32 dead letters and leaves them all in the poison queue', async () => {
      const { queue } = await freshQueue('tiles', 1);
      const sent = Array.from({ length: 40 }, (_, i) => message(`dl${i}`));
      await queue.sendBatch(sent);
      for (;;) {
        const batch = await queue.receive(32, 30_000);
        if (batch.length === 0) break;
        await Promise.all(batch.map((d) => queue.release(d)));
      }
      const keys = (ms: JobMessage[]) => ms.map((x) => x.jobKey).sort();
      expect(keys(await queue.deadLetters())).toEqual(keys(sent));
      expect(keys(await queue.deadLetters())).toEqual(keys(sent));
    });
  });

  it('encodes and decodes message text losslessly for unicode', () => {
    const text = '{"key":"a+b%2Fc/Zürich/日本/é.tif"}';
    expect(decodeMessageText(encodeMessageText(text))).toBe(text);
  });
});
