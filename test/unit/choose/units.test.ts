import { describe, expect, it } from 'vitest';
import { InvalidParamsError } from '../../../shared/domain/errors.js';
import {
  formatDuration,
  formatKm,
  formatMemory,
  InvalidDurationError,
  InvalidMemoryError,
  parseDuration,
  parseMemory,
} from '../../../shared/placement/catalog/index.js';

describe('parseDuration', () => {
  it.each([
    ['720', 720],
    ['90s', 90],
    ['12m', 720],
    ['12min', 720],
    ['1h30m', 5_400],
    ['1h 30m', 5_400],
    ['1.5h', 5_400],
    ['2H', 7_200],
    [' 40m ', 2_400],
    ['0.5', 1],
    ['24h', 86_400],
  ])('reads %j as %i seconds', (input, seconds) => {
    expect(parseDuration(input)).toBe(seconds);
  });

  it.each([
    ['', 'is empty'],
    ['12x', 'unknown unit "x"'],
    ['12 minutes', 'unknown unit "minutes"'],
    ['1h1h', 'gives the h unit twice'],
    ['1h30', 'is not a duration'],
    ['m', 'is not a duration'],
    ['-5m', 'is not a duration'],
    ['0', 'must be longer than zero'],
    ['0m', 'must be longer than zero'],
    ['25h', 'longer than 24 h'],
  ])('refuses %j with a typed error that says why (%s)', (input, why) => {
    const error = (() => {
      try {
        parseDuration(input);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(error).toBeInstanceOf(InvalidDurationError);
    expect(error).toBeInstanceOf(InvalidParamsError);
    expect((error as InvalidDurationError).code).toBe('INVALID_PARAMS');
    expect((error as InvalidDurationError).input).toBe(input);
    expect((error as Error).message).toContain(why);
    expect((error as Error).message).toContain('90s, 12m, 1h30m');
  });
});

describe('parseMemory', () => {
  it.each([
    ['2048', 2_048],
    ['512MB', 512],
    ['512 MiB', 512],
    ['512m', 512],
    ['3GB', 3_072],
    ['3gib', 3_072],
    ['1.5GB', 1_536],
    ['0.1', 1],
  ])('reads %j as %i MB', (input, mb) => {
    expect(parseMemory(input)).toBe(mb);
  });

  it.each([
    ['', 'is empty'],
    ['3TB', 'unknown unit "tb"'],
    ['GB', 'is not a memory size'],
    ['3 G B', 'is not a memory size'],
    ['-1GB', 'is not a memory size'],
    ['0MB', 'must be more than zero'],
    ['2000GB', 'larger than 1 TB'],
  ])('refuses %j with a typed error that says why (%s)', (input, why) => {
    expect(() => parseMemory(input)).toThrow(InvalidMemoryError);
    expect(() => parseMemory(input)).toThrow(why);
  });
});

describe('formatting', () => {
  it.each([
    [720, '12 min'],
    [5_400, '1 h 30 min'],
    [90, '1 min 30 s'],
    [45, '45 s'],
    [3_600, '1 h'],
  ])('formats %i seconds as %j', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
  });

  it.each([
    [3_072, '3 GB'],
    [1_536, '1,536 MB'],
    [10_240, '10 GB'],
    [Number.POSITIVE_INFINITY, 'unlimited'],
  ])('formats %d MB as %j', (mb, text) => {
    expect(formatMemory(mb)).toBe(text);
  });

  it('formats distances in whole kilometres with separators', () => {
    expect(formatKm(4_321.7)).toBe('4,322 km');
    expect(formatKm(0.2)).toBe('0 km');
  });
});
