import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { ArtefactNotFoundError, InvalidIngestRequestError } from '../../../shared/app/ingest.js';
import { AdapterError } from '../../../shared/domain/errors.js';
import type { ArtefactFetcher, ArtefactHref, OpenedArtefact } from '../../../shared/ports/artefact-fetcher.port.js';

/**
 * Local-path hrefs (`/data/T31UDQ.tif`, `./scene.tif`, `file:///...`), the
 * local backend only. A relative path is resolved against `cwd`. The `stat`
 * size is the up-front size check; the stream is read in 1 MiB chunks.
 */
export class FsArtefactFetcher implements ArtefactFetcher {
  readonly name = 'fs';
  constructor(private readonly cwd: string) {}

  async open(href: ArtefactHref): Promise<OpenedArtefact> {
    if (href.kind !== 'path') throw new InvalidIngestRequestError(`[fetcher:fs] reads local paths, not ${href.kind}`);
    const path = resolve(this.cwd, href.path);
    let size: number;
    try {
      const s = await stat(path);
      if (!s.isFile()) throw new InvalidIngestRequestError(`[fetcher:fs] ${path} is not a regular file`);
      size = s.size;
    } catch (cause) {
      if (cause instanceof InvalidIngestRequestError) throw cause;
      const code = (cause as { code?: string }).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') throw new ArtefactNotFoundError('fs', path, { cause });
      throw new AdapterError(`[fetcher:fs] cannot stat ${path} (${code ?? (cause as Error).message}); check its permissions`, { cause });
    }
    const stream = createReadStream(path, { highWaterMark: 1 << 20 });
    return {
      size,
      body: stream as AsyncIterable<Uint8Array>,
      cancel: async () => {
        stream.destroy();
      },
    };
  }
}
