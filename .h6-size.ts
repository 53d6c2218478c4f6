import { writeSyntheticScene, SENTINEL_LIKE_SCENE } from './shared/raster/index.js';
import { statSync } from 'node:fs';
for (const [w,h,bs,c] of [[512,384,64,'DEFLATE'],[256,192,32,'DEFLATE'],[256,192,32,'NONE']] as const) {
  await writeSyntheticScene('/tmp/h6/s.tif', { width: w, height: h, ...SENTINEL_LIKE_SCENE, seed: 7, blockSize: bs, compression: c });
  console.log(w,h,bs,c,statSync('/tmp/h6/s.tif').size);
}
