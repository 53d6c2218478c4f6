export * from './catalog.js';
export * from './errors.js';
export * from './lookup.js';
export * from './regions.js';
export * from './units.js';
