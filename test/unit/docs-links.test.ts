import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

// Every relative link of the README and docs/ names a file or folder that is in the tree: a renamed document leaves
// no reader at a dead end (docs/soak.md pointed at a streams.md that was never written).
const root = resolve(import.meta.dirname, '../..');
const documents = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The relative targets of a Markdown text's inline links and images, without their #fragment; fenced code is skipped. */
function relativeLinks(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '');
  const out: string[] = [];
  for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    const target = (m[1] as string).split('#')[0] as string;
    if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    out.push(decodeURIComponent(target));
  }
  return out;
}

describe('documentation links', () => {
  it('finds the relative links of a text, not the absolute ones, nor those in code', () => {
    const text = '[a](docs/a.md#x) [b](https://e.org/b.md) ![c](img/c.png "C") [d](#top) [e](mailto:x@y)\n```\n[f](f.md)\n```\n';
    expect(relativeLinks(text)).toEqual(['docs/a.md', 'img/c.png']);
  });

  it.each(documents)('%s: every relative link resolves to a file in the tree', (doc) => {
    const base = dirname(join(root, doc));
    const dead = relativeLinks(readFileSync(join(root, doc), 'utf8')).filter((t) => !existsSync(resolve(base, t)));
    expect(dead).toEqual([]);
  });
});
