import type { Scenario } from './scenario-kit.js';
import { BAND_SCENARIOS } from './scenarios-bands.js';
import { CLAIM_SCENARIOS } from './scenarios-claims.js';
import { CORE_SCENARIOS } from './scenarios-core.js';
import { CRS_SCENARIOS } from './scenarios-crs.js';
import { FEATURE_BATCH_SCENARIOS } from './scenarios-feature-batches.js';
import { FEATURES_CURRENT_SCENARIOS } from './scenarios-features-current.js';
import { INGEST_SCENARIOS } from './scenarios-ingest.js';
import { INGEST_LANE_SCENARIOS } from './scenarios-ingest-lanes.js';
import { INTEGRITY_SCENARIOS } from './scenarios-integrity.js';
import { OBJECT_SCENARIOS } from './scenarios-objects.js';
import { OUTPUT_SCENARIOS } from './scenarios-outputs.js';
import { POSTGIS_SCENARIOS } from './scenarios-postgis.js';
import { PYRAMID_SCENARIOS } from './scenarios-pyramids.js';
import { RASTER_VALUE_SCENARIOS } from './scenarios-raster-values.js';
import { RENDERED_SCENARIOS } from './scenarios-rendered.js';
import { ROUND3_SCENARIOS } from './scenarios-round3.js';
import { SCENE_SCENARIOS } from './scenarios-scenes.js';
import { SOAK_SCENARIOS } from './scenarios-soak.js';
import { STAC_SCENARIOS } from './scenarios-stac.js';
import { TRANSPORT_SCENARIOS } from './scenarios-transports.js';
import { VERSION_SCENARIOS } from './scenarios-versions.js';
import { WEB_MAP_SCENARIOS } from './scenarios-web-maps.js';

export type { Limitation, Scenario } from './scenario-kit.js';

/**
 * THE scenario table: the first wave's fifteen (01-15), then the ones that pin
 * each exactly-once hole closed since, one file per area. Each scenario runs
 * unchanged on every backend, against a fresh namespace; see docs/parity.md.
 */
export const SCENARIOS: readonly Scenario[] = [
  ...CORE_SCENARIOS,
  ...OBJECT_SCENARIOS,
  ...VERSION_SCENARIOS,
  ...SCENE_SCENARIOS,
  ...TRANSPORT_SCENARIOS,
  ...CLAIM_SCENARIOS,
  ...POSTGIS_SCENARIOS,
  ...FEATURES_CURRENT_SCENARIOS,
  ...FEATURE_BATCH_SCENARIOS,
  ...INGEST_SCENARIOS,
  ...INGEST_LANE_SCENARIOS,
  ...SOAK_SCENARIOS,
  ...STAC_SCENARIOS,
  ...BAND_SCENARIOS,
  ...OUTPUT_SCENARIOS,
  ...ROUND3_SCENARIOS,
  ...INTEGRITY_SCENARIOS,
  ...RASTER_VALUE_SCENARIOS,
  ...CRS_SCENARIOS,
  ...PYRAMID_SCENARIOS,
  ...RENDERED_SCENARIOS,
  ...WEB_MAP_SCENARIOS,
  // Rows in numeric order: 99 before 100.
].sort((a, b) => a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

// Two scenarios with one id would hide each other in the matrix.
const ids = new Set<string>();
for (const s of SCENARIOS) {
  if (ids.has(s.id)) throw new Error(`parity: scenario id ${s.id} is used twice`);
  ids.add(s.id);
}
