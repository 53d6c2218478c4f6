import { InvalidExpressionError, InvalidParamsError } from '../domain/errors.js';

/**
 * Band math: a hand-written recursive-descent parser (no eval, no Function)
 * and a vectorised evaluator.
 *
 * Grammar (whitespace between tokens is ignored):
 * ```
 * expression := sum
 * sum        := product (('+' | '-') product)*
 * product    := unary (('*' | '/') unary)*
 * unary      := ('-' | '+') unary | primary
 * primary    := number | band | function '(' expression (',' expression)* ')' | '(' expression ')'
 * number     := digits ['.' digits] [('e' | 'E') ['+' | '-'] digits]  |  '.' digits [exponent]
 * band       := one of the band names given to the parser
 * function   := abs | sqrt | min | max
 * ```
 */

export type BinaryOperator = '+' | '-' | '*' | '/';
export type FunctionName = 'abs' | 'sqrt' | 'min' | 'max';

/** A node of the parsed expression; `pos` is the 0-based offset of its first character. */
export type ExpressionNode =
  | { readonly kind: 'number'; readonly value: number; readonly pos: number }
  | { readonly kind: 'band'; readonly name: string; readonly pos: number }
  | { readonly kind: 'negate'; readonly arg: ExpressionNode; readonly pos: number }
  | {
      readonly kind: 'binary';
      readonly op: BinaryOperator;
      readonly left: ExpressionNode;
      readonly right: ExpressionNode;
      readonly pos: number;
    }
  | { readonly kind: 'call'; readonly fn: FunctionName; readonly args: readonly ExpressionNode[]; readonly pos: number };

export interface Expression {
  readonly text: string;
  readonly root: ExpressionNode;
  /** The bands the expression reads, in order of first use. */
  readonly bands: readonly string[];
}

/** Longest expression accepted, in characters. */
export const MAX_EXPRESSION_LENGTH = 1000;
/** Deepest nesting of parentheses, unary operators and function calls. */
export const MAX_EXPRESSION_DEPTH = 64;

const FUNCTIONS: Readonly<Record<FunctionName, { min: number; max: number }>> = {
  abs: { min: 1, max: 1 },
  sqrt: { min: 1, max: 1 },
  min: { min: 2, max: 16 },
  max: { min: 2, max: 16 },
};

type Token =
  | { readonly kind: 'number'; readonly value: number; readonly pos: number; readonly text: string }
  | { readonly kind: 'ident'; readonly text: string; readonly pos: number }
  | { readonly kind: 'punct'; readonly text: '+' | '-' | '*' | '/' | '(' | ')' | ','; readonly pos: number }
  | { readonly kind: 'end'; readonly pos: number; readonly text: '' };

const NUMBER = /(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?/y;
const IDENT = /[A-Za-z_][A-Za-z0-9_]*/y;
const WHITESPACE = /[ \t\r\n]*/y;

/** Tokens are read one at a time, so the error reported is always the leftmost one. */
class Lexer {
  private at = 0;
  private peeked: Token | undefined;

  constructor(private readonly text: string) {}

  peek(): Token {
    this.peeked ??= this.read();
    return this.peeked;
  }

  next(): Token {
    const t = this.peek();
    this.peeked = undefined;
    return t;
  }

  private read(): Token {
    WHITESPACE.lastIndex = this.at;
    WHITESPACE.exec(this.text);
    const pos = WHITESPACE.lastIndex;
    this.at = pos;
    if (pos >= this.text.length) return { kind: 'end', pos, text: '' };
    const c = this.text[pos] as string;
    if ('+-*/(),'.includes(c)) {
      this.at = pos + 1;
      return { kind: 'punct', text: c as '+', pos };
    }
    NUMBER.lastIndex = pos;
    const num = NUMBER.exec(this.text);
    if (num) {
      const end = pos + num[0].length;
      const after = this.text[end];
      if (after !== undefined && /[A-Za-z0-9_.]/.test(after)) {
        throw new InvalidExpressionError(`malformed number ${JSON.stringify(this.text.slice(pos, end + 1))}`, end);
      }
      const value = Number(num[0]);
      if (!Number.isFinite(value)) throw new InvalidExpressionError(`number ${num[0]} is out of range`, pos);
      this.at = end;
      return { kind: 'number', value, pos, text: num[0] };
    }
    IDENT.lastIndex = pos;
    const id = IDENT.exec(this.text);
    if (id) {
      this.at = pos + id[0].length;
      return { kind: 'ident', text: id[0], pos };
    }
    throw new InvalidExpressionError(`unexpected character ${JSON.stringify(c)}`, pos);
  }
}

function describe(t: Token): string {
  return t.kind === 'end' ? 'the end of the expression' : `${JSON.stringify(t.text)}`;
}

/**
 * Parses a band-math expression such as `(B08 - B04) / (B08 + B04)`.
 * Throws InvalidExpressionError with the 0-based position of the first error.
 *
 * @example
 * parseExpression('(B08 - B04) / (B08 + B04)', ['B04', 'B08']).bands // ['B08', 'B04']
 * parseExpression('B08 + * B04', ['B04', 'B08'])                     // throws: ... at position 6
 */
export function parseExpression(text: string, bandNames: readonly string[]): Expression {
  if (typeof text !== 'string') throw new InvalidExpressionError('the expression must be a string', 0);
  if (text.length > MAX_EXPRESSION_LENGTH) {
    throw new InvalidExpressionError(
      `the expression is ${text.length} characters long, more than the ${MAX_EXPRESSION_LENGTH} allowed`,
      MAX_EXPRESSION_LENGTH,
    );
  }
  if (text.trim() === '') throw new InvalidExpressionError('the expression is empty', 0);
  const known = new Set(bandNames);
  const used: string[] = [];
  const lexer = new Lexer(text);

  const tooDeep = (t: Token) => new InvalidExpressionError(`the expression nests deeper than ${MAX_EXPRESSION_DEPTH} levels`, t.pos);

  const sum = (depth: number): ExpressionNode => {
    let left = product(depth);
    for (;;) {
      const t = lexer.peek();
      if (t.kind !== 'punct' || (t.text !== '+' && t.text !== '-')) return left;
      lexer.next();
      left = { kind: 'binary', op: t.text, left, right: product(depth), pos: left.pos };
    }
  };

  const product = (depth: number): ExpressionNode => {
    let left = unary(depth);
    for (;;) {
      const t = lexer.peek();
      if (t.kind !== 'punct' || (t.text !== '*' && t.text !== '/')) return left;
      lexer.next();
      left = { kind: 'binary', op: t.text, left, right: unary(depth), pos: left.pos };
    }
  };

  const unary = (depth: number): ExpressionNode => {
    const t = lexer.peek();
    if (t.kind === 'punct' && (t.text === '-' || t.text === '+')) {
      if (depth >= MAX_EXPRESSION_DEPTH) throw tooDeep(t);
      lexer.next();
      const arg = unary(depth + 1);
      return t.text === '-' ? { kind: 'negate', arg, pos: t.pos } : arg;
    }
    return primary(depth);
  };

  const primary = (depth: number): ExpressionNode => {
    const t = lexer.next();
    if (t.kind === 'number') return { kind: 'number', value: t.value, pos: t.pos };
    if (t.kind === 'punct' && t.text === '(') {
      if (depth >= MAX_EXPRESSION_DEPTH) throw tooDeep(t);
      const inner = sum(depth + 1);
      expect(')', t);
      return inner;
    }
    if (t.kind === 'ident') {
      const open = lexer.peek();
      if (open.kind === 'punct' && open.text === '(') return call(t, depth);
      if (!known.has(t.text)) {
        const hint = bandNames.find((b) => b.toLowerCase() === t.text.toLowerCase());
        throw new InvalidExpressionError(
          `unknown band ${JSON.stringify(t.text)}${hint ? ` (did you mean ${JSON.stringify(hint)}?)` : ''}; ` +
            `the bands are ${bandNames.length ? bandNames.join(', ') : '(none)'}`,
          t.pos,
        );
      }
      if (!used.includes(t.text)) used.push(t.text);
      return { kind: 'band', name: t.text, pos: t.pos };
    }
    throw new InvalidExpressionError(`expected a number, a band or "(" but found ${describe(t)}`, t.pos);
  };

  const call = (name: Token & { kind: 'ident' }, depth: number): ExpressionNode => {
    if (!Object.hasOwn(FUNCTIONS, name.text)) {
      throw new InvalidExpressionError(
        `unknown function ${JSON.stringify(name.text)}; the functions are ${Object.keys(FUNCTIONS).join(', ')}`,
        name.pos,
      );
    }
    const fn = name.text as FunctionName;
    const open = lexer.next();
    if (depth >= MAX_EXPRESSION_DEPTH) throw tooDeep(open);
    const args = [sum(depth + 1)];
    for (;;) {
      const t = lexer.peek();
      if (t.kind === 'punct' && t.text === ',') {
        lexer.next();
        args.push(sum(depth + 1));
        continue;
      }
      break;
    }
    expect(')', open);
    const arity = FUNCTIONS[fn];
    if (args.length < arity.min || args.length > arity.max) {
      const wants = arity.min === arity.max ? `${arity.min}` : `${arity.min} to ${arity.max}`;
      throw new InvalidExpressionError(`${fn} takes ${wants} argument${arity.max === 1 ? '' : 's'}, got ${args.length}`, name.pos);
    }
    return { kind: 'call', fn, args, pos: name.pos };
  };

  const expect = (what: ')', opener: Token) => {
    const t = lexer.next();
    if (t.kind !== 'punct' || t.text !== what) {
      throw new InvalidExpressionError(
        `expected ${JSON.stringify(what)} to close the "(" at position ${opener.pos} but found ${describe(t)}`,
        t.pos,
      );
    }
  };

  const root = sum(0);
  const end = lexer.next();
  if (end.kind !== 'end')
    throw new InvalidExpressionError(`expected an operator or the end of the expression but found ${describe(end)}`, end.pos);
  return { text, root, bands: used };
}

export interface EvaluateOptions {
  /** Written where the result is undefined: a source nodata pixel, a division by zero, a non-finite value. */
  readonly noData: number;
  /** An input pixel equal to this (in any band the expression reads) gives `noData`. */
  readonly sourceNoData?: number | undefined;
}

/** Pixels evaluated per pass: big enough for tight loops, small enough to stay in L1/L2 cache. */
const CHUNK = 2048;

type Values = Float64Array | Float32Array | Uint32Array | Int32Array | Uint16Array | Int16Array | Uint8Array;

/**
 * A compiled subtree: a constant, or `run(start, n)` giving the values of
 * pixels [start, start + n) at indices [0, n). A band returns a view of its own
 * pixels (read-only); an operator returns a register (`writable`) that its
 * parent may overwrite, so evaluation allocates nothing per pixel.
 */
type Compiled = number | { readonly run: (start: number, n: number) => Values; readonly writable: boolean };
type Kernel = Exclude<Compiled, number>;

/** Where an operator writes: into an operand's register when it has one, else into its own. */
function destination(a: Kernel, b: Kernel | undefined): (x: Values, y: Values | undefined) => Float64Array {
  if (a.writable) return (x) => x as Float64Array;
  if (b?.writable) return (_x, y) => y as Float64Array;
  const own = new Float64Array(CHUNK);
  return () => own;
}

function compile(node: ExpressionNode, bands: Readonly<Record<string, Values>>): Compiled {
  switch (node.kind) {
    case 'number':
      return node.value;
    case 'band': {
      const src = bands[node.name] as Values;
      return { run: (s, n) => src.subarray(s, s + n), writable: false };
    }
    case 'negate': {
      const a = compile(node.arg, bands);
      if (typeof a === 'number') return -a;
      const dest = destination(a, undefined);
      return {
        run: (s, n) => {
          const x = a.run(s, n);
          const d = dest(x, undefined);
          for (let i = 0; i < n; i++) d[i] = -(x[i] as number);
          return d;
        },
        writable: true,
      };
    }
    case 'binary':
      return compileBinary(node.op, compile(node.left, bands), compile(node.right, bands));
    case 'call':
      return compileCall(
        node.fn,
        node.args.map((a) => compile(a, bands)),
      );
    default: {
      const never: never = node;
      throw new Error(`unknown expression node ${JSON.stringify(never)}`);
    }
  }
}

function applyScalar(op: BinaryOperator, a: number, b: number): number {
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    case '*':
      return a * b;
    case '/':
      // Division by zero is undefined, whatever IEEE says (x/0 = Infinity): NaN propagates to nodata.
      return b === 0 ? Number.NaN : a / b;
    default: {
      const never: never = op;
      throw new Error(`unknown operator ${String(never)}`);
    }
  }
}

/** `kernel op k` (or `k op kernel` when `constantFirst`), one loop per operator so each stays monomorphic. */
function withConstant(op: BinaryOperator, a: Kernel, k: number, constantFirst: boolean): Kernel {
  const dest = destination(a, undefined);
  let run: Kernel['run'];
  switch (op) {
    case '+':
      run = (s, n) => {
        const x = a.run(s, n);
        const d = dest(x, undefined);
        for (let i = 0; i < n; i++) d[i] = (x[i] as number) + k;
        return d;
      };
      break;
    case '*':
      run = (s, n) => {
        const x = a.run(s, n);
        const d = dest(x, undefined);
        for (let i = 0; i < n; i++) d[i] = (x[i] as number) * k;
        return d;
      };
      break;
    case '-':
      run = constantFirst
        ? (s, n) => {
            const x = a.run(s, n);
            const d = dest(x, undefined);
            for (let i = 0; i < n; i++) d[i] = k - (x[i] as number);
            return d;
          }
        : (s, n) => {
            const x = a.run(s, n);
            const d = dest(x, undefined);
            for (let i = 0; i < n; i++) d[i] = (x[i] as number) - k;
            return d;
          };
      break;
    case '/':
      run = constantFirst
        ? (s, n) => {
            const x = a.run(s, n);
            const d = dest(x, undefined);
            for (let i = 0; i < n; i++) {
              const q = x[i] as number;
              d[i] = q === 0 ? Number.NaN : k / q;
            }
            return d;
          }
        : (s, n) => {
            const x = a.run(s, n);
            const d = dest(x, undefined);
            if (k === 0) d.fill(Number.NaN, 0, n);
            else for (let i = 0; i < n; i++) d[i] = (x[i] as number) / k;
            return d;
          };
      break;
    default: {
      const never: never = op;
      throw new Error(`unknown operator ${String(never)}`);
    }
  }
  return { run, writable: true };
}

function compileBinary(op: BinaryOperator, a: Compiled, b: Compiled): Compiled {
  if (typeof a === 'number' && typeof b === 'number') return applyScalar(op, a, b);
  if (typeof b === 'number') return withConstant(op, a as Kernel, b, false);
  if (typeof a === 'number') return withConstant(op, b, a, true);
  const dest = destination(a, b);
  let run: Kernel['run'];
  switch (op) {
    case '+':
      run = (s, n) => {
        const x = a.run(s, n);
        const y = b.run(s, n);
        const d = dest(x, y);
        for (let i = 0; i < n; i++) d[i] = (x[i] as number) + (y[i] as number);
        return d;
      };
      break;
    case '-':
      run = (s, n) => {
        const x = a.run(s, n);
        const y = b.run(s, n);
        const d = dest(x, y);
        for (let i = 0; i < n; i++) d[i] = (x[i] as number) - (y[i] as number);
        return d;
      };
      break;
    case '*':
      run = (s, n) => {
        const x = a.run(s, n);
        const y = b.run(s, n);
        const d = dest(x, y);
        for (let i = 0; i < n; i++) d[i] = (x[i] as number) * (y[i] as number);
        return d;
      };
      break;
    case '/':
      run = (s, n) => {
        const x = a.run(s, n);
        const y = b.run(s, n);
        const d = dest(x, y);
        for (let i = 0; i < n; i++) {
          const q = y[i] as number;
          d[i] = q === 0 ? Number.NaN : (x[i] as number) / q;
        }
        return d;
      };
      break;
    default: {
      const never: never = op;
      throw new Error(`unknown operator ${String(never)}`);
    }
  }
  return { run, writable: true };
}

function compileCall(fn: FunctionName, args: Compiled[]): Compiled {
  if (args.every((a) => typeof a === 'number')) {
    const v = args as number[];
    switch (fn) {
      case 'abs':
        return Math.abs(v[0] as number);
      case 'sqrt':
        return Math.sqrt(v[0] as number);
      case 'min':
        return Math.min(...v);
      case 'max':
        return Math.max(...v);
      default: {
        const never: never = fn;
        throw new Error(`unknown function ${String(never)}`);
      }
    }
  }
  switch (fn) {
    case 'abs':
    case 'sqrt': {
      const a = args[0] as Kernel;
      const dest = destination(a, undefined);
      const f = fn === 'abs' ? Math.abs : Math.sqrt; // sqrt of a negative is NaN, hence nodata
      return {
        run: (s, n) => {
          const x = a.run(s, n);
          const d = dest(x, undefined);
          for (let i = 0; i < n; i++) d[i] = f(x[i] as number);
          return d;
        },
        writable: true,
      };
    }
    case 'min':
    case 'max': {
      // Fold the arguments pairwise into an owned register; Math.min/max propagate NaN.
      const pick = fn === 'min' ? Math.min : Math.max;
      const constants = args.filter((a): a is number => typeof a === 'number');
      const start = constants.length ? pick(...constants) : undefined;
      const kernels = args.filter((a): a is Kernel => typeof a !== 'number');
      const own = new Float64Array(CHUNK);
      return {
        run: (s, n) => {
          if (start === undefined) own.set((kernels[0] as Kernel).run(s, n));
          else own.fill(start, 0, n);
          for (let k = start === undefined ? 1 : 0; k < kernels.length; k++) {
            const y = (kernels[k] as Kernel).run(s, n);
            for (let i = 0; i < n; i++) own[i] = pick(own[i] as number, y[i] as number);
          }
          return own;
        },
        writable: true,
      };
    }
    default: {
      const never: never = fn;
      throw new Error(`unknown function ${String(never)}`);
    }
  }
}

/** Float32's largest finite value: larger results would become Infinity when stored. */
const FLOAT32_MAX = 3.4028234663852886e38;

/** The float32 just above `x` (a float32); NaN for NaN, which no result equals anyway. */
export function nextFloat32Up(x: number): number {
  if (Number.isNaN(x) || x === Number.POSITIVE_INFINITY) return x;
  if (x === 0) return 1.401298464324817e-45;
  const f = Float32Array.of(x);
  const bits = new Int32Array(f.buffer);
  bits[0] = (bits[0] as number) + (x > 0 ? 1 : -1);
  return f[0] as number;
}

/**
 * The bands X and Y when the expression is a normalized difference, `(X - Y) / (X + Y)` (or `/ (Y + X)`): NDVI,
 * NDWI, NBR and the rest of the family, the tiler's default (NDVI). Two distinct bands only.
 */
function normalizedDifferenceBands(root: ExpressionNode): readonly [string, string] | undefined {
  if (root.kind !== 'binary' || root.op !== '/') return undefined;
  const { left, right } = root;
  if (left.kind !== 'binary' || left.op !== '-' || right.kind !== 'binary' || right.op !== '+') return undefined;
  if (left.left.kind !== 'band' || left.right.kind !== 'band' || right.left.kind !== 'band' || right.right.kind !== 'band')
    return undefined;
  const x = left.left.name;
  const y = left.right.name;
  if (x === y) return undefined;
  const sum = [right.left.name, right.right.name];
  return (sum[0] === x && sum[1] === y) || (sum[0] === y && sum[1] === x) ? [x, y] : undefined;
}

/**
 * A normalized difference in one pass over the pixels: the same float64 operations as the vectorised kernels
 * (X - Y, X + Y, which IEEE addition gives the same in either order, and the quotient, undefined where the sum is 0),
 * the same float32 range test, nodata clash and source nodata mask, so the same float32 results; where the kernels
 * make three passes for the operators and one for the mask, each writing a float64 register (NDVI of a 512 x 512
 * uint16 window on one pinned core of Node 24: 1.3 to 2.6 ms against 3.1 to 4.5 ms; docs/benchmarks.md). A NaN source nodata needs no test
 * of its own: a NaN band value makes the quotient NaN, which the range test sends to nodata.
 */
function normalizedDifference(
  out: Float32Array,
  x: Values,
  y: Values,
  length: number,
  sourceNoData: number | undefined,
  noData: number,
  clash: number,
  moved: number,
): void {
  // NaN equals nothing: with no source nodata (or a NaN one) the mask test is always true.
  const nd = sourceNoData === undefined ? Number.NaN : sourceNoData;
  for (let i = 0; i < length; i++) {
    const a = x[i] as number;
    const b = y[i] as number;
    const sum = a + b;
    const v = sum === 0 ? Number.NaN : (a - b) / sum;
    if (a !== nd && b !== nd && v <= FLOAT32_MAX && v >= -FLOAT32_MAX) {
      out[i] = v;
      if (out[i] === clash) out[i] = moved;
    } else out[i] = noData;
  }
}

const TYPED = [Float64Array, Float32Array, Uint32Array, Int32Array, Uint16Array, Int16Array, Uint8Array];

/**
 * Evaluates `expr` over `length` pixels of the named bands into a Float32Array.
 * A pixel is `opts.noData` when any band the expression reads equals
 * `opts.sourceNoData` (NaN matches NaN), on division by zero, and when the
 * result is not a finite float32 (NaN, infinity, overflow, sqrt of a negative).
 * A valid result equal to `opts.noData` in float32 is written as the next
 * float32 above it, so that only invalid pixels read as nodata.
 *
 * Evaluation is vectorised: each operator runs as one tight loop over a chunk
 * of pixels, so the per-pixel cost is a few typed-array operations.
 *
 * @example
 * const ndvi = evaluate(parseExpression('(B08 - B04) / (B08 + B04)', ['B04', 'B08']),
 *                       { B04: red, B08: nir }, red.length, { noData: -9999, sourceNoData: 0 });
 */
export function evaluate(
  expr: Expression,
  bands: Readonly<Record<string, ArrayLike<number>>>,
  length: number,
  opts: EvaluateOptions,
): Float32Array {
  if (!Number.isInteger(length) || length < 0)
    throw new InvalidParamsError(`evaluate: length must be a non-negative integer, got ${length}`);
  if (typeof opts.noData !== 'number') throw new InvalidParamsError('evaluate: noData must be a number');
  const values: Record<string, Values> = {};
  for (const name of expr.bands) {
    const b = bands[name];
    if (!b) throw new InvalidParamsError(`evaluate: the expression reads band ${name}, which was not supplied`);
    if (b.length < length) throw new InvalidParamsError(`evaluate: band ${name} holds ${b.length} pixels, fewer than ${length}`);
    // Typed arrays are read in place; anything else (a plain array) is copied once.
    values[name] = TYPED.some((T) => b instanceof T) ? (b as Values) : Float64Array.from({ length }, (_, i) => b[i] as number);
  }
  const out = new Float32Array(length);
  const noData = opts.noData;
  // A valid result that lands on the nodata value (NDVI 0 with --dst-nodata 0) would read as nodata: it is moved to
  // the next float32 above it, as GDAL moves a warped value off an integer band's nodata (GWKAvoidNoData).
  const clash = Math.fround(noData);
  const moved = nextFloat32Up(clash);
  const nd = normalizedDifferenceBands(expr.root);
  if (nd !== undefined) {
    normalizedDifference(out, values[nd[0]] as Values, values[nd[1]] as Values, length, opts.sourceNoData, noData, clash, moved);
    return out;
  }
  const compiled = compile(expr.root, values);
  const sourceNoData = opts.sourceNoData;
  const masks = sourceNoData === undefined ? [] : expr.bands.map((n) => values[n] as Values);
  const nan = sourceNoData !== undefined && Number.isNaN(sourceNoData);
  for (let start = 0; start < length; start += CHUNK) {
    const n = Math.min(CHUNK, length - start);
    if (typeof compiled === 'number') {
      const ok = compiled <= FLOAT32_MAX && compiled >= -FLOAT32_MAX;
      out.fill(ok ? (Math.fround(compiled) === clash ? moved : compiled) : noData, start, start + n);
    } else {
      const r = compiled.run(start, n);
      const o = out.subarray(start, start + n);
      // NaN fails both comparisons, so one test covers NaN, +-Infinity and float32 overflow.
      // The usual case (a numeric source nodata, one or two bands) folds the mask into the same pass.
      const m0 = masks[0];
      const m1 = masks[1];
      if (!nan && masks.length === 2 && m0 !== undefined && m1 !== undefined) {
        for (let i = 0; i < n; i++) {
          const v = r[i] as number;
          if (m0[start + i] !== sourceNoData && m1[start + i] !== sourceNoData && v <= FLOAT32_MAX && v >= -FLOAT32_MAX) {
            o[i] = v;
            if (o[i] === clash) o[i] = moved;
          } else o[i] = noData;
        }
        continue;
      }
      if (!nan && masks.length === 1 && m0 !== undefined) {
        for (let i = 0; i < n; i++) {
          const v = r[i] as number;
          if (m0[start + i] !== sourceNoData && v <= FLOAT32_MAX && v >= -FLOAT32_MAX) {
            o[i] = v;
            if (o[i] === clash) o[i] = moved;
          } else o[i] = noData;
        }
        continue;
      }
      for (let i = 0; i < n; i++) {
        const v = r[i] as number;
        if (v <= FLOAT32_MAX && v >= -FLOAT32_MAX) {
          o[i] = v;
          if (o[i] === clash) o[i] = moved;
        } else o[i] = noData;
      }
    }
    if (masks.length === 0) continue;
    // Source nodata last: one pass per band the expression reads.
    const o = out.subarray(start, start + n);
    for (const m of masks) {
      if (nan) {
        for (let i = 0; i < n; i++) if (Number.isNaN(m[start + i])) o[i] = noData;
      } else {
        for (let i = 0; i < n; i++) if (m[start + i] === sourceNoData) o[i] = noData;
      }
    }
  }
  return out;
}
