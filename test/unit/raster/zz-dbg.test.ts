import { writeFileSync } from 'node:fs';
import { it } from 'vitest';
import { parseCrs, crsWkt2 } from '../../../shared/raster/crs.js';
import { CRS_FAMILIES } from './crs-definition.test.js';
it('d', () => {
  writeFileSync('/tmp/crs/ours.json', JSON.stringify(CRS_FAMILIES.map((f) => ({ srs: f.srs, wkt: crsWkt2(parseCrs(f.srs)) }))));
});
