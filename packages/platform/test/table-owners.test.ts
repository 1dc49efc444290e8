import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * One writer per table for the whole workspace: every statement that writes `outbox`, `entregas`,
 * `entrega_intentos` or `webhooks` lives in that table's module under packages/platform/src/db/tables/
 * (CONTRIBUTING.md, "One owning repository per table"). The services compose those modules; a write
 * anywhere else fails here, naming its file and line.
 */

const ROOT = join(__dirname, '..', '..', '..');

const OWNERS = {
  outbox: 'packages/platform/src/db/tables/outbox.table.ts',
  entregas: 'packages/platform/src/db/tables/deliveries.table.ts',
  entrega_intentos: 'packages/platform/src/db/tables/delivery-attempts.table.ts',
  webhooks: 'packages/platform/src/db/tables/webhooks.table.ts',
} as const;

type Owned = keyof typeof OWNERS;
const isOwned = (table: string): table is Owned => Object.hasOwn(OWNERS, table);

interface Write {
  table: string;
  line: number;
  /** The words that write, as found. */
  text: string;
}

// A table name as a statement spells it: bare, quoted, schema-qualified, or through kysely's sql.table/sql.id.
const NAME = String.raw`(?:\$\{\s*sql\.(?:table|id)\(\s*)?["'\x60]?(?:\w+["']?\.["']?)?(\w+)`;
const WRITES = [
  // kysely's builders: db.insertInto('entregas'), trx.updateTable('webhooks as w'), ...
  new RegExp(String.raw`\b(?:insertInto|replaceInto|updateTable|deleteFrom|mergeInto)\(\s*["'\x60](?:\w+\.)?(\w+)`, 'g'),
  // SQL text: insert into, update, delete from, merge into, truncate; any case.
  new RegExp(String.raw`\binsert\s+into\s+${NAME}`, 'gi'),
  new RegExp(String.raw`\bupdate\s+(?:only\s+)?${NAME}`, 'gi'),
  new RegExp(String.raw`\bdelete\s+from\s+(?:only\s+)?${NAME}`, 'gi'),
  new RegExp(String.raw`\bmerge\s+into\s+${NAME}`, 'gi'),
  new RegExp(String.raw`\btruncate\s+(?:table\s+)?(?:only\s+)?${NAME}`, 'gi'),
];

/**
 * TypeScript comments blanked out (their line breaks kept, so lines still count): prose that says
 * "update webhooks" is not a write. A `//` after a colon is a URL's, not a comment.
 */
function withoutComments(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\//g, (c) => c.replace(/[^\n]/g, ' ')).replace(/(^|[^:])\/\/[^\n]*/g, (_c, before: string) => before);
}

/** Every write a source makes to a table, with its line. */
function writesIn(source: string): Write[] {
  const code = withoutComments(source);
  const found: Write[] = [];
  for (const pattern of WRITES) {
    for (const m of code.matchAll(pattern)) {
      const table = m[1];
      if (table === undefined) continue;
      found.push({ table: table.toLowerCase(), line: code.slice(0, m.index).split('\n').length, text: m[0] });
    }
  }
  return found.sort((a, b) => a.line - b.line);
}

/** The sources of services/*\/src and packages/*\/src, but for migrations, declarations and built output. */
function workspaceSources(): string[] {
  const roots = ['services', 'packages'].flatMap((top) =>
    readdirSync(join(ROOT, top), { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => join(ROOT, top, d.name, 'src')),
  );
  const files: string[] = [];
  const walk = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // a package without src/
    }
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) {
        if (!['node_modules', 'dist', 'migrations'].includes(e.name)) walk(path);
      } else if (/\.tsx?$/.test(e.name) && !/\.(test|d)\.tsx?$/.test(e.name)) {
        files.push(path);
      }
    }
  };
  roots.forEach(walk);
  return files;
}

describe('one writer per table', () => {
  it('finds writes in every form a statement takes, and not in reads or prose', () => {
    const writes = writesIn(`
      await db.insertInto('outbox').values(rows).execute();
      await trx.updateTable("webhooks as w").set({ activo: false });
      await db.deleteFrom(\`entrega_intentos\`).where('entrega_id', '=', id);
      await sql\`INSERT INTO entregas (id) values (\${id})\`;
      await sql\`update public.outbox set enviado_en = now()\`;
      await sql\`with gone as (Delete From "entregas" e using doomed d where e.id = d.id) select 1\`;
      await sql\`update \${sql.table('webhooks')} set url = \${url}\`;
      await sql\`truncate table entrega_intentos\`;
      await send('https://example.test/hook'); await sql\`delete from outbox where id = \${id}\`;
    `);
    expect(writes.map((w) => w.table)).toEqual(['outbox', 'webhooks', 'entrega_intentos', 'entregas', 'outbox', 'entregas', 'webhooks', 'entrega_intentos', 'outbox']);
    expect(writes.map((w) => w.line)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10]);

    const reads = writesIn(`
      // the relay would update outbox here, but the table module does
      /* a rotation's update webhooks set secret = ... lives in webhooks.table.ts */
      await db.selectFrom('entregas').select('id').forUpdate().skipLocked().execute();
      await sql\`select id from webhooks where id = \${id} for update of webhooks skip locked\`;
      await sql\`insert into guias (numero_guia) values (\${n})\`;
    `);
    expect(reads.filter((w) => isOwned(w.table))).toEqual([]);
    expect(reads.map((w) => w.table)).toContain('guias');
  });

  it('holds every write of outbox, entregas, entrega_intentos and webhooks to its table module', () => {
    const sources = workspaceSources();
    expect(sources.length).toBeGreaterThan(100);
    const elsewhere: string[] = [];
    for (const file of sources) {
      const path = relative(ROOT, file);
      for (const w of writesIn(readFileSync(file, 'utf8'))) {
        if (isOwned(w.table) && OWNERS[w.table] !== path) elsewhere.push(`${path}:${w.line}: ${w.text} (its owner: ${OWNERS[w.table]})`);
      }
    }
    expect(elsewhere).toEqual([]);
  });

  it.each(Object.entries(OWNERS))('finds %s written by its module, %s', (table, owner) => {
    const writes = writesIn(readFileSync(join(ROOT, owner), 'utf8'));
    expect(writes.some((w) => w.table === table)).toBe(true);
  });
});
