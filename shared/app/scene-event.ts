/** Source object filter applied by every scene trigger (S3 notification, GCS finalize, BlobCreated). */
export interface SourceFilter {
  readonly prefix: string;
  readonly suffix: string;
}

/**
 * True when a decoded object key is a scene this stack processes. The
 * suffix match ignores case (`.TIF` is a TIFF too); the prefix does not,
 * since object stores are case-sensitive.
 */
export function acceptSourceObject(key: string, filter: SourceFilter): boolean {
  return key.startsWith(filter.prefix) && key.toLowerCase().endsWith(filter.suffix.toLowerCase());
}
