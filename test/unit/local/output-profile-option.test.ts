import { describe, expect, it } from 'vitest';
import { outputProfileOption } from '../../../cli/commands/options.js';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import { DEFAULT_PARAMS } from '../../../shared/domain/runtime-config.js';
import { tilingParams } from '../../../shared/domain/tiling-params.js';

/** `tessera run --compression C --level N`: the output profile of the processing parameters (and so of every job key). */
describe('tessera run --compression / --level', () => {
  const tiling = (output: Readonly<Record<string, unknown>> | undefined) => tilingParams({ ...DEFAULT_PARAMS, output });

  it('gives no override without either flag: the default profile stands', () => {
    expect(outputProfileOption(undefined, undefined)).toBeUndefined();
  });

  it.each([
    ['deflate', undefined, 'DEFLATE', 6],
    ['zstd', undefined, 'ZSTD', 9],
    ['ZSTD', '3', 'ZSTD', 3],
    ['deflate', '1', 'DEFLATE', 1],
    ['none', undefined, 'NONE', 0],
  ] as const)('--compression %s --level %s writes %s at level %i', (compression, level, codec, expected) => {
    const t = tiling(outputProfileOption(compression, level));
    expect([t.compression, t.level]).toEqual([codec, expected]);
  });

  it('--level alone changes the level of the default codec', () => {
    const t = tiling(outputProfileOption(undefined, '2'));
    expect(t.compression).toBe(tilingParams(DEFAULT_PARAMS).compression);
    expect(t.level).toBe(2);
  });

  it.each([
    ['lzw', undefined, /--compression must be deflate, zstd or none, got "lzw"/],
    ['deflate', '10', /--level must be a whole number from 1 to 9, got "10"/],
    ['zstd', '0', /--level must be a whole number from 1 to 22, got "0"/],
    ['zstd', 'fast', /--level must be a whole number from 1 to 22, got "fast"/],
    ['none', '6', /--level has no meaning with --compression none/],
  ])('--compression %s --level %s is refused with a typed error', (compression, level, message) => {
    expect(() => outputProfileOption(compression, level)).toThrow(InvalidParamsError);
    expect(() => outputProfileOption(compression, level)).toThrow(message);
  });
});
