import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { headings, links } from '../support/markdown';

/**
 * The front door and the guides stand on their own: the README stays short, every relative link in
 * them reaches a file of the repository (and, for a Markdown file, a heading that exists), and none
 * points outside the repository (a clone has no `../shared`).
 */

const ROOT = join(__dirname, '../..');
const DOCS = [
  'README.md',
  'CONTRIBUTING.md',
  'examples/receiver/README.md',
  'bench/README.md',
  'bench/HISTORY.md',
  ...['docs', 'docs/decisions'].flatMap((dir) =>
    readdirSync(join(ROOT, dir))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `${dir}/${f}`),
  ),
];
const read = (path: string): string => readFileSync(join(ROOT, path), 'utf8');

it('README.md is a short front door: at most 150 lines', () => {
  expect(read('README.md').replace(/\n$/, '').split('\n').length).toBeLessThanOrEqual(150);
});

it('README.md installs the pnpm of package.json\'s packageManager', () => {
  const { packageManager } = JSON.parse(read('package.json')) as { packageManager: string };
  expect(read('README.md')).toContain(`npm install -g ${packageManager}\n`);
});

it('bench/README.md holds the current figures in at most 300 lines; the dated runs are in bench/HISTORY.md', () => {
  expect(read('bench/README.md').replace(/\n$/, '').split('\n').length).toBeLessThanOrEqual(300);
});

it('checks the guides it should (docs/ holds the ones the README links)', () => {
  expect(DOCS).toEqual(expect.arrayContaining(['docs/integrators.md', 'docs/operations.md', 'docs/architecture.md', 'docs/runbook.md']));
});

it('finds links outside code, anchors included (its own helper, checked)', () => {
  const sample = '# A title\n[x](docs/a.md#b) `[not](c.md)`\n```\n[nor](d.md)\n```\n[y](#a-title)';
  expect(links(sample)).toEqual(['docs/a.md#b', '#a-title']);
});

describe.each(DOCS)('%s', (doc) => {
  const text = read(doc);

  it('every relative link resolves to a file in the repository, and every anchor to a heading', () => {
    const relativeLinks = links(text).filter((l) => !/^[a-z][a-z0-9+.-]*:/i.test(l));
    // A guide links onwards; a decision record may stand alone.
    if (!doc.startsWith('docs/decisions/')) expect(relativeLinks.length).toBeGreaterThan(0);
    const problems: string[] = [];
    for (const link of relativeLinks) {
      const [path = '', anchor] = link.split('#');
      const target = path === '' ? join(ROOT, doc) : join(ROOT, dirname(doc), decodeURI(path));
      if (relative(ROOT, target).startsWith('..')) {
        problems.push(`${link}: outside the repository`);
        continue;
      }
      if (!existsSync(target)) {
        problems.push(`${link}: no such file`);
        continue;
      }
      if (anchor !== undefined) {
        if (!statSync(target).isFile() || !target.endsWith('.md')) problems.push(`${link}: an anchor into a file that is not Markdown`);
        else if (!headings(readFileSync(target, 'utf8')).some((h) => h.slug === anchor)) problems.push(`${link}: no heading with that anchor`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('never sends the reader outside the repository (no ../shared)', () => {
    expect(text).not.toMatch(/\.\.\/shared/);
  });
});
