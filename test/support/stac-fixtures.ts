/** The red band as a one-band COG beside its Item, as STAC publishers lay Sentinel-2 L2A out. */
export const RED_ASSET = {
  href: './B04.tif',
  type: 'image/tiff; application=geotiff',
  'eo:bands': [{ name: 'B04', common_name: 'red' }],
} as const;

/**
 * The bytes of a STAC 1.0 Item (S2B_T31UDQ_20240601, sentinel-2-l2a) with these assets and a JPEG
 * thumbnail: what the STAC scene tests of the trigger rule and of the parity matrix stage.
 */
export function stacItemBytes(assets: Readonly<Record<string, unknown>>): Uint8Array {
  return new TextEncoder().encode(
    JSON.stringify({
      type: 'Feature',
      stac_version: '1.0.0',
      id: 'S2B_T31UDQ_20240601',
      collection: 'sentinel-2-l2a',
      geometry: null,
      properties: { datetime: '2024-06-01T10:56:29Z' },
      links: [],
      assets: { thumbnail: { href: './thumb.jpg', type: 'image/jpeg' }, ...assets },
    }),
  );
}
