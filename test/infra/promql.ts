import type { Registry } from '@svc/observability';

/**
 * Just enough PromQL reading to check alert and dashboard expressions against the services' real
 * registries: which metrics they select, with which label matchers, which labels they group by.
 * Not a full parser: it tokenises, skips ranges and strings, and tells functions from metrics by
 * the parenthesis that follows a name.
 */

export interface Matcher {
  label: string;
  op: '=' | '!=' | '=~' | '!~';
  value: string;
}

export interface Selector {
  metric: string;
  matchers: Matcher[];
}

export interface ExprUse {
  selectors: Selector[];
  functions: string[];
  /** Labels named in by (...), without (...), on (...), ignoring (...), group_left/right (...). */
  grouping: string[];
}

type Token =
  | { kind: 'ident'; text: string }
  | { kind: 'string'; text: string }
  | { kind: 'number' }
  | { kind: 'punct'; text: string };

const GROUPING = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);
const BINARY_KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'atan2']);
const NUMBER_WORDS = new Set(['inf', 'nan']);

/** The functions and aggregations the checked files may use; a misspelt one is an error. */
export const PROMQL_FUNCTIONS = new Set([
  'sum', 'min', 'max', 'avg', 'count', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile', 'count_values', 'group',
  'rate', 'irate', 'increase', 'delta', 'idelta', 'deriv', 'predict_linear', 'histogram_quantile', 'abs', 'ceil',
  'floor', 'round', 'clamp', 'clamp_min', 'clamp_max', 'absent', 'absent_over_time', 'changes', 'resets', 'time',
  'timestamp', 'vector', 'scalar', 'label_replace', 'label_join', 'sort', 'sort_desc', 'sum_over_time',
  'avg_over_time', 'max_over_time', 'min_over_time', 'count_over_time', 'last_over_time', 'quantile_over_time',
]);

function unquote(raw: string): string {
  const body = raw.slice(1, -1);
  return raw.startsWith('`') ? body : body.replace(/\\(.)/g, '$1');
}

export function tokenize(expr: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < expr.length) {
    const rest = expr.slice(i);
    let m: RegExpMatchArray | null;
    if ((m = rest.match(/^\s+/))) {
      i += m[0].length;
    } else if (rest.startsWith('#')) {
      const end = expr.indexOf('\n', i);
      i = end === -1 ? expr.length : end;
    } else if ((m = rest.match(/^("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)/))) {
      tokens.push({ kind: 'string', text: unquote(m[0]) });
      i += m[0].length;
    } else if (rest.startsWith('[')) {
      // A range or subquery: durations and Grafana's $__rate_interval, nothing to check inside.
      const end = expr.indexOf(']', i);
      if (end === -1) throw new Error(`unclosed [ in: ${expr}`);
      i = end + 1;
    } else if ((m = rest.match(/^\$\{?[A-Za-z0-9_]+\}?/))) {
      tokens.push({ kind: 'number' }); // a Grafana variable stands for a value
      i += m[0].length;
    } else if ((m = rest.match(/^(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(?:ms|s|m|h|d|w|y)?/))) {
      tokens.push({ kind: 'number' });
      i += m[0].length;
    } else if ((m = rest.match(/^[A-Za-z_:][A-Za-z0-9_:]*/))) {
      tokens.push({ kind: 'ident', text: m[0] });
      i += m[0].length;
    } else if ((m = rest.match(/^(==|!=|>=|<=|=~|!~|[-+*/%^<>=(){},@])/))) {
      tokens.push({ kind: 'punct', text: m[0] });
      i += m[0].length;
    } else {
      throw new Error(`unexpected ${JSON.stringify(rest.slice(0, 10))} in: ${expr}`);
    }
  }
  return tokens;
}

const isPunct = (t: Token | undefined, text: string): boolean => t?.kind === 'punct' && t.text === text;

export function analyse(expr: string): ExprUse {
  const tokens = tokenize(expr);
  const use: ExprUse = { selectors: [], functions: [], grouping: [] };
  const readMatchers = (start: number): { matchers: Matcher[]; next: number } => {
    const matchers: Matcher[] = [];
    let j = start + 1;
    while (!isPunct(tokens[j], '}')) {
      const label = tokens[j];
      const op = tokens[j + 1];
      const value = tokens[j + 2];
      if (label?.kind !== 'ident' || op?.kind !== 'punct' || value?.kind !== 'string' || !['=', '!=', '=~', '!~'].includes(op.text)) {
        throw new Error(`bad label matcher in: ${expr}`);
      }
      matchers.push({ label: label.text, op: op.text as Matcher['op'], value: value.text });
      j += 3;
      if (isPunct(tokens[j], ',')) j++;
      else if (!isPunct(tokens[j], '}')) throw new Error(`bad label matcher list in: ${expr}`);
    }
    return { matchers, next: j + 1 };
  };

  let i = 0;
  while (i < tokens.length) {
    const t = tokens[i]!;
    if (t.kind === 'punct' && t.text === '{') {
      throw new Error(`selector without a metric name in: ${expr}`);
    }
    if (t.kind !== 'ident') {
      i++;
      continue;
    }
    const word = t.text.toLowerCase();
    if (GROUPING.has(word)) {
      i++;
      if (isPunct(tokens[i], '(')) {
        i++;
        while (!isPunct(tokens[i], ')')) {
          const label = tokens[i];
          if (label?.kind === 'ident') use.grouping.push(label.text);
          else if (!isPunct(label, ',')) throw new Error(`bad grouping list in: ${expr}`);
          i++;
        }
        i++;
      }
      continue;
    }
    if (BINARY_KEYWORDS.has(word) || NUMBER_WORDS.has(word)) {
      i++;
      continue;
    }
    if (word === 'offset') {
      i += 2;
      continue;
    }
    const next = tokens[i + 1];
    // `f(` is a call; `sum by (x) (` is an aggregation with its grouping first.
    if (isPunct(next, '(') || (next?.kind === 'ident' && ['by', 'without'].includes(next.text.toLowerCase()))) {
      use.functions.push(t.text);
      i++;
      continue;
    }
    const selector: Selector = { metric: t.text, matchers: [] };
    i++;
    if (isPunct(tokens[i], '{')) {
      const read = readMatchers(i);
      selector.matchers = read.matchers;
      i = read.next;
    }
    use.selectors.push(selector);
  }
  return use;
}

export interface MetricInfo {
  type: string;
  labels: Set<string>;
}

/** Labels every scraped series carries besides its own: the registry's default and Prometheus' target labels. */
export const TARGET_LABELS = ['job', 'instance'];

export function catalogFromRegistry(registry: Registry, defaultLabels: string[]): Map<string, MetricInfo> {
  const catalog = new Map<string, MetricInfo>();
  for (const metric of registry.getMetricsAsArray()) {
    // prom-client keeps the declared label names on the metric object; its typings do not expose them.
    const labelNames = (metric as unknown as { labelNames?: readonly string[] }).labelNames ?? [];
    catalog.set(metric.name, { type: String(metric.type), labels: new Set([...labelNames, ...defaultLabels, ...TARGET_LABELS]) });
  }
  return catalog;
}

/**
 * The series a selector names, as Prometheus stores it: a histogram `h` is scraped as `h_bucket`
 * (with `le`), `h_sum` and `h_count`; `up` is Prometheus' own per target.
 */
export function resolveSeries(catalog: Map<string, MetricInfo>, name: string): MetricInfo | undefined {
  if (name === 'up') return { type: 'gauge', labels: new Set(TARGET_LABELS) };
  const direct = catalog.get(name);
  if (direct && direct.type !== 'histogram' && direct.type !== 'summary') return direct;
  const m = name.match(/^(.*)_(bucket|sum|count)$/);
  const base = m ? catalog.get(m[1]!) : undefined;
  if (base && (base.type === 'histogram' || base.type === 'summary')) {
    if (m![2] === 'bucket' && base.type !== 'histogram') return undefined;
    return m![2] === 'bucket' ? { type: 'counter', labels: new Set([...base.labels, 'le']) } : { ...base, type: 'counter' };
  }
  return undefined;
}

export interface CheckOptions {
  catalog: Map<string, MetricInfo>;
  /** Known closed value sets, `metric` → `label` → values; `=`/`!=` matchers must use one of them. */
  values: Record<string, Record<string, readonly string[]>>;
  /** Labels a template (legend or annotation) reads from the result, e.g. {{route}} or $labels.queue. */
  templateLabels?: string[];
}

/** Every problem found in one expression, as readable sentences; empty when it is sound. */
export function checkExpr(expr: string, options: CheckOptions): string[] {
  const problems: string[] = [];
  let use: ExprUse;
  try {
    use = analyse(expr);
  } catch (err) {
    return [(err as Error).message];
  }
  if (use.selectors.length === 0) problems.push(`selects no metric: ${expr}`);
  for (const fn of use.functions) {
    if (!PROMQL_FUNCTIONS.has(fn)) problems.push(`unknown function ${fn}() in: ${expr}`);
  }
  const available = new Set<string>();
  for (const s of use.selectors) {
    const info = resolveSeries(options.catalog, s.metric);
    if (!info) {
      problems.push(`metric ${s.metric} is in no registry`);
      continue;
    }
    info.labels.forEach((l) => available.add(l));
    for (const m of s.matchers) {
      if (!info.labels.has(m.label)) problems.push(`${s.metric} has no label ${m.label}`);
      const known = options.values[s.metric]?.[m.label];
      if (known && (m.op === '=' || m.op === '!=') && !known.includes(m.value)) {
        problems.push(`${s.metric}{${m.label}="${m.value}"}: ${m.label} is one of ${known.join(', ')}`);
      }
    }
  }
  for (const g of use.grouping) {
    if (!available.has(g)) problems.push(`grouping label ${g} is on none of the selected metrics in: ${expr}`);
  }
  // What a template can read: the outermost grouping when there is one, else the series' own labels.
  const resultLabels = use.grouping.length ? new Set(use.grouping) : available;
  for (const l of options.templateLabels ?? []) {
    if (!resultLabels.has(l)) problems.push(`template reads label ${l}, which the result of ${expr} does not have`);
  }
  return problems;
}

/** Labels read by a Grafana legend (`{{route}}`) or an alert annotation (`{{ $labels.queue }}`). */
export function templateLabels(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(/\{\{\s*\$labels\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g)) found.add(m[1]!);
  for (const m of text.matchAll(/\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g)) found.add(m[1]!);
  return [...found];
}
