export type * from './artefact-fetcher.port.js';
export type * from './claim-store.port.js';
export type * from './clock.port.js';
export type * from './feature-sink.port.js';
export type * from './job-queue.port.js';
export type * from './manifest-store.port.js';
export type * from './object-store.port.js';
export type * from './telemetry.port.js';
