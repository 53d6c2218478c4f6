import { createServer, request, type Server } from 'node:http';

/** One request that went through the recorder. */
export interface RecordedRequest {
  readonly method: string;
  readonly url: URL;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly status: number;
}

/**
 * A forwarding HTTP proxy on 127.0.0.1 that records method, URL and answer of
 * every request, so a test can check what an SDK put on the wire (which upload
 * type, which precondition) against a real emulator behind it.
 */
export async function startRecorder(target: string): Promise<{ url: string; requests: RecordedRequest[]; close(): Promise<void> }> {
  const upstream = new URL(target);
  const requests: RecordedRequest[] = [];
  const server: Server = createServer((req, res) => {
    const forward = request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host } },
      (answer) => {
        requests.push({
          method: req.method ?? '',
          url: new URL(req.url ?? '/', target),
          headers: req.headers,
          status: answer.statusCode ?? 0,
        });
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.on('error', (error) => {
      res.writeHead(502);
      res.end(String(error));
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
