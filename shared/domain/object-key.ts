import { InvalidEventError, InvalidObjectKeyError } from './errors.js';

/** S3, GCS and Azure Blob all cap keys at 1,024 bytes of UTF-8. */
export const MAX_OBJECT_KEY_BYTES = 1024;

/**
 * Decode an object key as event sources deliver it: S3 notifications
 * form-encode keys, so `+` is a space and `%2F` a slash.
 *
 * @example
 * decodeEventKey('L2A/T31UDQ%2FB08.tif') // 'L2A/T31UDQ/B08.tif'
 * decodeEventKey('my+scene.tif')         // 'my scene.tif'
 */
export function decodeEventKey(raw: string): string {
  try {
    return decodeURIComponent(raw.replace(/\+/g, ' '));
  } catch (cause) {
    throw new InvalidEventError(`object key ${JSON.stringify(raw)} is not valid URL encoding`, { cause });
  }
}

/**
 * Refuse keys that would be ambiguous or unsafe on one of the backends:
 * empty, over 1,024 UTF-8 bytes, leading slash, empty / `.` / `..` segments,
 * backslashes, control characters or lone surrogates. Returns the key.
 */
export function validateObjectKey(key: string): string {
  const fail = (why: string): never => {
    throw new InvalidObjectKeyError(`object key ${JSON.stringify(key.slice(0, 200))} is invalid: ${why}`);
  };
  if (typeof key !== 'string' || key.length === 0) fail('it is empty');
  if (!key.isWellFormed()) fail('it holds a lone UTF-16 surrogate');
  if (Buffer.byteLength(key, 'utf8') > MAX_OBJECT_KEY_BYTES) fail(`it is longer than ${MAX_OBJECT_KEY_BYTES} bytes of UTF-8`);
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what we refuse
  if (/[\u0000-\u001f\u007f]/.test(key)) fail('it contains a control character');
  if (key.includes('\\')) fail('it contains a backslash');
  if (key.startsWith('/')) fail('it starts with a slash');
  for (const segment of key.split('/')) {
    if (segment === '') fail('it has an empty path segment');
    if (segment === '.' || segment === '..') fail(`it has a "${segment}" path segment`);
  }
  return key;
}
