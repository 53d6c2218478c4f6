import { InvalidParamsError } from '../../domain/errors.js';

/**
 * Input errors of `tessera choose`. They share the INVALID_PARAMS code of
 * {@link InvalidParamsError} (callers that switch on `code` need no new case)
 * and add what a caller needs to help the user.
 */

/** A runtime such as `12m`, `90s`, `1h30m` or `720` (seconds) that does not parse or is out of range. */
export class InvalidDurationError extends InvalidParamsError {
  readonly input: string;
  constructor(input: string, why: string) {
    super(`runtime ${JSON.stringify(input)} ${why}; write it as seconds (720) or with units (90s, 12m, 1h30m, 1.5h)`);
    this.input = input;
  }
}

/** A memory size such as `3GB`, `512MB` or `2048` (MB) that does not parse or is out of range. */
export class InvalidMemoryError extends InvalidParamsError {
  readonly input: string;
  constructor(input: string, why: string) {
    super(`memory ${JSON.stringify(input)} ${why}; write it as MB (2048) or with units (512MB, 3GB, 1.5GiB)`);
    this.input = input;
  }
}

/** Latitude/longitude outside [-90, 90] / [-180, 180] or not numbers. */
export class InvalidCoordinatesError extends InvalidParamsError {}

/** A region code the catalog does not know; `suggestions` are the closest known codes. */
export class UnknownRegionError extends InvalidParamsError {
  readonly region: string;
  readonly suggestions: readonly string[];
  constructor(region: string, suggestions: readonly string[]) {
    super(
      `unknown region code ${JSON.stringify(region)}` +
        (suggestions.length > 0 ? `; did you mean ${suggestions.join(', ')}?` : '') +
        " Use the provider's code (eu-west-1, europe-west1, westeurope) or --lat/--lon; `tessera choose --list-regions` prints them all",
    );
    this.region = region;
    this.suggestions = suggestions;
  }
}
