import { escapeXml, unescapeXml } from './xml.js';

/** One `<Item>` of GDAL's metadata XML (TIFF tag 42112). `sample` is the 0-based band, absent for dataset items. */
export interface GdalMetadataItem {
  readonly name: string;
  readonly value: string;
  readonly sample?: number | undefined;
  readonly role?: string | undefined;
}

/**
 * The GDAL_METADATA XML GDAL itself writes, e.g. band descriptions:
 * `<Item name="DESCRIPTION" sample="0" role="description">B04</Item>`.
 */
export function buildGdalMetadata(items: readonly GdalMetadataItem[]): string {
  const lines = items.map((i) => {
    const sample = i.sample === undefined ? '' : ` sample="${i.sample}"`;
    const role = i.role === undefined ? '' : ` role="${escapeXml(i.role)}"`;
    return `  <Item name="${escapeXml(i.name)}"${sample}${role}>${escapeXml(i.value)}</Item>`;
  });
  return `<GDALMetadata>\n${lines.join('\n')}\n</GDALMetadata>\n`;
}

/** Band descriptions as GDAL_METADATA items (band 1 is sample 0). */
export function bandDescriptionItems(descriptions: readonly string[]): GdalMetadataItem[] {
  return descriptions.map((value, sample) => ({ name: 'DESCRIPTION', value, sample, role: 'description' }));
}

const ITEM = /<Item\b([^>]*)>([\s\S]*?)<\/Item>/g;
const ATTR = /(\w+)\s*=\s*"([^"]*)"/g;

/** Parses the `<Item>`s of GDAL_METADATA XML; anything else in it is ignored. */
export function parseGdalMetadata(xml: string): GdalMetadataItem[] {
  const items: GdalMetadataItem[] = [];
  for (const m of xml.matchAll(ITEM)) {
    const attrs = new Map<string, string>();
    for (const a of (m[1] ?? '').matchAll(ATTR)) attrs.set(a[1] as string, unescapeXml(a[2] as string));
    const name = attrs.get('name');
    if (name === undefined) continue;
    const sample = attrs.get('sample');
    items.push({
      name,
      value: unescapeXml(m[2] ?? ''),
      sample: sample === undefined ? undefined : Number(sample),
      role: attrs.get('role'),
    });
  }
  return items;
}
