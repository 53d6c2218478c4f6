import { describe, expect, it } from 'vitest';
import { InvalidObjectKeyError } from '../../../shared/domain/errors.js';
import { validateObjectKey } from '../../../shared/domain/object-key.js';

describe('validateObjectKey', () => {
  it.each([
    'a.tif',
    'scenes/L2A/T31UDQ/B08.tif',
    'with space/and+plus.tif',
    'Zürich/日本.tif',
    'a%2Fb',
    '.hidden/x',
    `${'k'.repeat(1024)}`,
  ])('accepts %j', (key) => {
    expect(validateObjectKey(key)).toBe(key);
  });

  it.each([
    ['empty', ''],
    ['parent segment', 'a/../b'],
    ['dot segment', './a'],
    ['empty segment', 'a//b'],
    ['trailing slash', 'a/'],
    ['leading slash', '/a'],
    ['backslash', 'a\\b'],
    ['NUL', 'a\u0000b'],
    ['newline', 'a\nb'],
    ['lone surrogate', 'a\ud800b'],
    ['over 1024 bytes', 'é'.repeat(513)],
  ])('refuses a key with %s', (_what, key) => {
    expect(() => validateObjectKey(key)).toThrow(InvalidObjectKeyError);
  });
});
