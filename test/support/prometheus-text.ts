/**
 * Reads a `/metrics` answer as Prometheus does (text exposition format 0.0.4) and throws on the
 * first line a scraper would reject, so a test can assert on families and samples, not substrings.
 */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}
export interface Family {
  name: string;
  type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  help: string;
  samples: Sample[];
}

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: (-?\\d+))?$`);
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/y;

function parseValue(raw: string, line: string): number {
  // Prometheus parses floats as Go does: Inf and NaN in any letter case (prom-client writes "Nan").
  if (/^\+?inf$/i.test(raw)) return Infinity;
  if (/^-inf$/i.test(raw)) return -Infinity;
  if (/^nan$/i.test(raw)) return NaN;
  const n = Number(raw);
  if (Number.isNaN(n)) throw new Error(`bad value in: ${line}`);
  return n;
}

function parseLabels(raw: string | undefined, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  if (!raw) return labels;
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < raw.length) {
    const start = LABEL.lastIndex;
    const m = LABEL.exec(raw);
    if (!m || m.index !== start) throw new Error(`bad labels in: ${line}`);
    labels[m[1]!] = m[2]!.replace(/\\n/g, '\n').replace(/\\(["\\])/g, '$1');
  }
  return labels;
}

/** The family a sample belongs to: histogram and summary series carry suffixes. */
function familyOf(families: Map<string, Family>, name: string): Family | undefined {
  const direct = families.get(name);
  if (direct) return direct;
  const m = name.match(/^(.*)_(bucket|sum|count)$/);
  const base = m ? families.get(m[1]!) : undefined;
  if (base && (base.type === 'histogram' || (base.type === 'summary' && m![2] !== 'bucket'))) return base;
  return undefined;
}

export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    let m: RegExpMatchArray | null;
    if ((m = line.match(new RegExp(`^# HELP (${NAME}) (.*)$`)))) {
      const f = families.get(m[1]!) ?? { name: m[1]!, type: 'untyped', help: '', samples: [] };
      f.help = m[2]!;
      families.set(f.name, f);
    } else if ((m = line.match(new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`)))) {
      const f = families.get(m[1]!) ?? { name: m[1]!, type: 'untyped', help: '', samples: [] };
      if (f.samples.length) throw new Error(`TYPE after samples: ${line}`);
      f.type = m[2] as Family['type'];
      families.set(f.name, f);
    } else if (line.startsWith('#')) {
      continue;
    } else if ((m = line.match(SAMPLE))) {
      const family = familyOf(families, m[1]!);
      if (!family) throw new Error(`sample of an undeclared family: ${line}`);
      family.samples.push({ name: m[1]!, labels: parseLabels(m[2], line), value: parseValue(m[3]!, line) });
    } else {
      throw new Error(`not Prometheus text format: ${line}`);
    }
  }
  return families;
}

/** Sum of a family's samples named `name` whose labels include `match`. */
export function sampleSum(families: Map<string, Family>, name: string, match: Record<string, string> = {}): number {
  const family = familyOf(families, name);
  return (family?.samples ?? [])
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((sum, s) => sum + s.value, 0);
}
