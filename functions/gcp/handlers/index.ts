import { cloudEvent, http } from '@google-cloud/functions-framework';
import type { GcpRuntime } from '../compose.js';
import { createMosaicHandler } from './mosaic.handler.js';
import { createSceneHandler } from './scene.handler.js';
import { createTileHandler } from './tile.handler.js';

/** The function names (entry points) Tessera registers; infra/ deploys each with its trigger. */
export const GCP_FUNCTIONS = {
  scene: 'tesseraScene',
  tile: 'tesseraTile',
  mosaic: 'tesseraMosaic',
} as const;

export interface GcpFunctionRuntimes {
  /** Runtime of the event-driven functions (scene, tile): platform gcf2-event. */
  readonly event: GcpRuntime | (() => GcpRuntime);
  /** Runtime of the HTTP function (mosaic): platform gcf2-http. */
  readonly http: GcpRuntime | (() => GcpRuntime);
}

/**
 * Register the three functions with the Functions Framework. Each deployed
 * function runs one of them (`--entry-point`); registering all three costs
 * nothing, since runtimes are composed on first use.
 */
export function registerGcpFunctions(
  runtimes: GcpFunctionRuntimes,
  names: { readonly [K in keyof typeof GCP_FUNCTIONS]: string } = GCP_FUNCTIONS,
): void {
  cloudEvent(names.scene, createSceneHandler(runtimes.event));
  cloudEvent(names.tile, createTileHandler(runtimes.event));
  http(names.mosaic, createMosaicHandler(runtimes.http));
}

export { createMosaicHandler, createSceneHandler, createTileHandler };
