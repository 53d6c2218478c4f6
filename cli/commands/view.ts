import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { InvalidParamsError } from '../../shared/domain/errors.js';
import type { CliIo } from '../io.js';
import { viewBundle } from '../view/bundle.js';
import { startViewServer, VIEW_HOST, type ViewServer } from '../view/http-server.js';
import { type SceneView, sceneViewFromDir, sceneViewFromItem } from '../view/scene-view.js';
import { DEFAULT_DIR, intOption } from './options.js';

export const viewHelp = `tessera view: a web map of a scene's outputs, served from this machine

Starts an HTTP server on ${VIEW_HOST} (this machine only) serving one page, bundled from npm packages
(OpenLayers, pmtiles, proj4; nothing from a CDN), that shows the scene on a map:
  - its PMTiles archive or TileJSON tiles when the outputs have them, else its COG mosaic (--mosaic cog),
    else its COG tiles, read in place by HTTP range requests;
  - the footprint outline from the STAC Item, a legend of the colormap (the outputs' own, else a grey
    ramp over the data's min and max) and the value under the cursor, read from the COG.
The server answers only the objects of that scene. It runs until Ctrl-C. When $BROWSER names a browser,
the page is opened in it.

Usage: tessera view [--dir D] [--scene KEY] | --stac ITEM  [--port N] [--json]

  --dir PATH     backend directory (default ${DEFAULT_DIR}): the scene of the last \`tessera run\` there
  --scene KEY    another scene of --dir (its scene key, as \`tessera run\` prints it)
  --stac ITEM    a STAC Item file tessera wrote (mosaics/<scene>.stac.json, or a copy beside its assets):
                 the outputs it links, resolved relative to it
  --port N       the port to listen on (default 0: a free one the system picks)
  --json         print {url, scene, layers, bundle} as one JSON line once the server listens

The page's bundle ships prebuilt in the installed package; in a checkout it is built with esbuild on first
use and cached in node_modules/.cache/tessera-view/ (docs/web-maps.md, "Viewing").`;

export async function viewCommand(argv: string[], io: CliIo): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    strict: true,
    allowPositionals: true,
    options: {
      dir: { type: 'string' },
      scene: { type: 'string' },
      stac: { type: 'string' },
      port: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
  });
  if (positionals.length > 0)
    throw new InvalidParamsError(`unexpected argument ${JSON.stringify(positionals[0])}: give --dir, --scene or --stac`);
  if (values.stac !== undefined && (values.dir !== undefined || values.scene !== undefined)) {
    throw new InvalidParamsError('--stac ITEM names the outputs itself: give it alone, or --dir and --scene instead');
  }
  const port = intOption('port', values.port, 0, 0, 65_535);
  let scene: SceneView;
  if (values.stac !== undefined) {
    const path = resolve(io.cwd, values.stac);
    if (!existsSync(path)) throw new InvalidParamsError(`--stac ${values.stac}: no such file; give the path of a STAC Item tessera wrote`);
    scene = await sceneViewFromItem(path);
  } else {
    if (values.scene !== undefined && !/^[0-9a-f]{64}$/.test(values.scene)) {
      throw new InvalidParamsError(
        `--scene must be a scene key (64 hex digits, as \`tessera run\` prints it), got ${JSON.stringify(values.scene)}`,
      );
    }
    scene = await sceneViewFromDir(resolve(io.cwd, values.dir ?? DEFAULT_DIR), values.scene);
  }
  return serveView(scene, { port, json: values.json, io });
}

/**
 * Serves a scene's page until SIGINT or SIGTERM (what `tessera view` and `tessera run --view` do), printing the URL
 * first; opens it in $BROWSER when that is set. Returns 0 once the server has closed.
 */
export async function serveView(scene: SceneView, how: { port: number; json: boolean; io: CliIo }): Promise<number> {
  const bundle = await viewBundle();
  let server: ViewServer;
  try {
    server = await startViewServer({ root: scene.root, served: scene.served, config: scene.config, assets: bundle, port: how.port });
  } catch (cause) {
    const code = (cause as { code?: string }).code;
    if (code === 'EADDRINUSE' || code === 'EACCES') {
      throw new InvalidParamsError(
        `--port ${how.port}: ${VIEW_HOST}:${how.port} cannot be listened on (${code}); pick another, or 0 for any free one`,
        {
          cause,
        },
      );
    }
    throw cause;
  }
  const bytes = bundle.js.byteLength + bundle.css.byteLength;
  const layers = scene.config.layers.map((l) => ({ kind: l.kind, title: l.title }));
  if (how.json) {
    how.io.stdout(
      `${JSON.stringify({ url: server.url, scene: scene.config.scene, layers, notes: scene.config.notes, bundle: { bytes, cached: bundle.cached, buildMs: bundle.buildMs } })}\n`,
    );
  } else {
    how.io.stdout(
      `tessera view: ${server.url}\n` +
        `  scene   ${scene.config.scene}\n` +
        `  layers  ${layers.map((l) => l.title).join(', ')}\n` +
        scene.config.notes.map((n) => `  note    ${n}\n`).join('') +
        `  page    ${(bytes / 1024).toFixed(0)} KiB bundle (${bundle.cached ? 'cached' : `built in ${(bundle.buildMs / 1000).toFixed(1)} s`})\n` +
        'Ctrl-C to stop.\n',
    );
  }
  openInBrowser(server.url, how.io);
  await new Promise<void>((done) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      done();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  await server.close();
  return 0;
}

/**
 * Opens `url` in the browser $BROWSER names (as Python's webbrowser and xdg-open read it: the first of a
 * `:`-separated list, `%s` standing for the URL when given). Nothing is opened when it is unset: a headless machine
 * or CI has just the printed URL.
 */
function openInBrowser(url: string, io: CliIo): void {
  const browser = process.env.BROWSER?.split(':')[0]?.trim();
  if (!browser) return;
  const words = browser.split(/\s+/);
  const args = words.slice(1).map((w) => w.replace('%s', url));
  if (!words.slice(1).some((w) => w.includes('%s'))) args.push(url);
  const child = spawn(words[0] as string, args, { detached: true, stdio: 'ignore' });
  child.on('error', (error) => io.stderr(`tessera view: could not start $BROWSER (${browser}): ${error.message}; open ${url} yourself\n`));
  child.unref();
}
