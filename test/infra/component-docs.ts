import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { REPO_ROOT } from '../../infra/common/packaging.js';

/**
 * The args table of docs/deploy.md ("Tessera in your own Pulumi program"), generated from the Args interfaces of
 * infra/components/ and their TSDoc: each property's name, type, `@defaultValue` and summary. The components test
 * holds the docs to it; `node scripts/node.mjs tsx test/infra/component-docs.ts --write` rewrites the table.
 */

/** The interfaces documented, each with the component(s) it is the args of. */
export const ARGS_INTERFACES = [
  { file: 'infra/components/args.ts', name: 'TesseraArgs', component: 'all three' },
  { file: 'infra/components/aws.ts', name: 'TesseraAwsArgs', component: '`TesseraAws`' },
  { file: 'infra/components/gcp.ts', name: 'TesseraGcpArgs', component: '`TesseraGcp`' },
  { file: 'infra/components/azure.ts', name: 'TesseraAzureArgs', component: '`TesseraAzure`' },
] as const;

export interface ArgDoc {
  readonly name: string;
  readonly component: string;
  /** The declared type, without `| undefined`. */
  readonly type: string;
  readonly defaultValue: string | undefined;
  readonly summary: string;
}

/** Every documented property of the Args interfaces, in declaration order. */
export function argDocs(root: string = REPO_ROOT): ArgDoc[] {
  return ARGS_INTERFACES.flatMap(({ file, name, component }) => {
    const source = ts.createSourceFile(file, readFileSync(join(root, file), 'utf8'), ts.ScriptTarget.Latest, true);
    const found = source.statements.find((s): s is ts.InterfaceDeclaration => ts.isInterfaceDeclaration(s) && s.name.text === name);
    if (!found) throw new Error(`${file} declares no interface ${name}`);
    return found.members.filter(ts.isPropertySignature).map((member): ArgDoc => {
      const doc = ts.getJSDocCommentsAndTags(member).find(ts.isJSDoc);
      const tag = doc?.tags?.find((t) => t.tagName.text === 'defaultValue');
      const type = (member.type?.getText(source) ?? 'unknown').replace(/\s*\|\s*undefined$/, '');
      return {
        name: member.name.getText(source),
        component,
        type,
        defaultValue: tag === undefined ? undefined : ts.getTextOfJSDocComment(tag.comment)?.trim(),
        summary: (ts.getTextOfJSDocComment(doc?.comment) ?? '').replace(/\s+/g, ' ').trim(),
      };
    });
  });
}

const cell = (text: string) => text.replace(/\|/g, '\\|');

/** The markdown table of {@link argDocs}. */
export function renderArgsTable(docs: readonly ArgDoc[] = argDocs()): string {
  const rows = docs.map(
    (d) => `| \`${d.name}\` | ${d.component} | \`${cell(d.type)}\` | ${cell(d.defaultValue ?? '(none)')} | ${cell(d.summary)} |`,
  );
  return ['| arg | of | type | default | meaning |', '| --- | --- | --- | --- | --- |', ...rows].join('\n');
}

export const TABLE_START = '<!-- component-args: generated from infra/components/*.ts by test/infra/component-docs.ts -->';
export const TABLE_END = '<!-- /component-args -->';
export const DEPLOY_DOC = join(REPO_ROOT, 'docs', 'deploy.md');

/**
 * A markdown table as rows of trimmed cells, separator row dropped: what it says, whatever the column padding
 * (Biome aligns the columns of the tables in docs/).
 */
export function tableCells(table: string): string[][] {
  return table
    .trim()
    .split('\n')
    .map((line) =>
      line
        .trim()
        .replace(/^\||\|$/g, '')
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    )
    .filter((cells) => !cells.every((c) => /^:?-+:?$/.test(c)));
}

/** The table docs/deploy.md holds between the markers, or undefined without them. */
export function documentedTable(text: string = readFileSync(DEPLOY_DOC, 'utf8')): string | undefined {
  const start = text.indexOf(TABLE_START);
  const end = text.indexOf(TABLE_END);
  if (start < 0 || end < start) return undefined;
  return text.slice(start + TABLE_START.length, end).trim();
}

if (process.argv[1]?.endsWith('component-docs.ts') && process.argv.includes('--write')) {
  const text = readFileSync(DEPLOY_DOC, 'utf8');
  const start = text.indexOf(TABLE_START);
  const end = text.indexOf(TABLE_END);
  if (start < 0 || end < start) throw new Error(`docs/deploy.md has no ${TABLE_START} ... ${TABLE_END} block`);
  writeFileSync(DEPLOY_DOC, `${text.slice(0, start + TABLE_START.length)}\n${renderArgsTable()}\n${text.slice(end)}`);
  // Biome aligns the table's columns, as `npm run lint` expects them.
  execFileSync(join(REPO_ROOT, 'node_modules', '.bin', 'biome'), ['format', '--write', DEPLOY_DOC], { stdio: 'inherit' });
  console.log(`wrote the args table of docs/deploy.md (${argDocs().length} args)`);
}

/** The heading of the README section whose first `ts` block is the example program. */
export const README_SECTION = '## Use it from your own Pulumi program';
/** What the example imports; the tests resolve it to the components in this repository. */
export const PACKAGE_SUBPATH = 'tessera/pulumi';
export const COMPONENTS_ENTRY = join(REPO_ROOT, 'infra', 'components', 'index.ts');

/** The README's example program, as written there. */
export function readmeExample(text: string = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8')): string {
  const start = text.indexOf(`\n${README_SECTION}\n`);
  if (start < 0) throw new Error(`README.md has no section "${README_SECTION}"`);
  const block = /```ts\n([\s\S]*?)```/.exec(text.slice(start));
  if (!block?.[1]) throw new Error(`README.md's "${README_SECTION}" has no \`\`\`ts block`);
  return block[1];
}

/**
 * The example with `tessera/pulumi` resolved to infra/components/index.ts, as the package's `exports["./pulumi"]`
 * resolves it for a user (the packaging test installs the packed package and runs it there).
 */
export function resolvedReadmeExample(source: string = readmeExample()): string {
  const from = `'${PACKAGE_SUBPATH}'`;
  if (!source.includes(`from ${from}`)) throw new Error(`the README example does not import from ${from}`);
  return source.replaceAll(`from ${from}`, `from ${JSON.stringify(COMPONENTS_ENTRY)}`);
}
