import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { parse } from 'yaml';
import { JOBS } from '@svc/contracts';
import type { AttemptResult } from '@svc/webhook-sender';
import { createGatewayMetrics } from '../../services/gateway/src/observability/gateway-metrics';
import { createDispatcherMetrics, QUEUE_STATES } from '../../services/dispatcher/src/observability/dispatcher-metrics';
import type { AuthEvents } from '../../services/gateway/src/auth/auth-events';
import type { DeferReason, SlotState } from '../../services/dispatcher/src/fair-share/webhook-slots.limiter';
import { githubSlug, headings } from '../support/markdown';
import { catalogFromRegistry, checkExpr, templateLabels, TARGET_LABELS, type MetricInfo } from './promql';

const root = join(__dirname, '../..');
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

// Closed label values the expressions may match with = or !=. Typed against the code's own unions,
// so a value added there without being added here fails the typecheck.
type Exhaustive<All, Listed> = [Exclude<All, Listed>] extends [never] ? true : false;
const ATTEMPT_RESULTS = ['2xx', '3xx', '4xx', '5xx', 'timeout', 'network', 'blocked'] as const satisfies readonly AttemptResult[];
const attemptResultsComplete: Exhaustive<AttemptResult, (typeof ATTEMPT_RESULTS)[number]> = true;
type AuthReason = Parameters<AuthEvents['failure']>[0];
const AUTH_REASONS = ['missing', 'scheme', 'invalid', 'revoked'] as const satisfies readonly AuthReason[];
const authReasonsComplete: Exhaustive<AuthReason, (typeof AUTH_REASONS)[number]> = true;
type AdminAuthReason = Parameters<AuthEvents['adminFailure']>[0];
const ADMIN_AUTH_REASONS = ['missing', 'scheme', 'malformed', 'wrong', 'limited'] as const satisfies readonly AdminAuthReason[];
const adminAuthReasonsComplete: Exhaustive<AdminAuthReason, (typeof ADMIN_AUTH_REASONS)[number]> = true;
const QUEUES = [JOBS.shipmentEvent.queue, JOBS.delivery.queue];

interface PrometheusConfig {
  global?: { scrape_interval?: string };
  rule_files: string[];
  alerting?: { alertmanagers: Array<{ static_configs?: Array<{ targets: string[] }> }> };
  scrape_configs: Array<{
    job_name: string;
    static_configs?: Array<{ targets: string[] }>;
    dns_sd_configs?: Array<{ names: string[]; type: string; port: number }>;
  }>;
}
const prometheus = parse(read('infra/prometheus/prometheus.yml')) as PrometheusConfig;
const jobNames = prometheus.scrape_configs.map((c) => c.job_name);

const KNOWN_VALUES: Record<string, Record<string, readonly string[]>> = {
  up: { job: jobNames },
  svc_webhook_deliveries_total: { outcome: ['success', 'failure'] },
  svc_webhook_attempts_total: { result: ATTEMPT_RESULTS },
  svc_queue_jobs: { state: QUEUE_STATES, queue: QUEUES },
  svc_token_cache_lookups_total: { result: ['hit', 'miss'] },
  svc_shipment_refusals_total: { reason: ['daily_limit', 'credits'] },
  svc_auth_failures_total: { reason: AUTH_REASONS },
  svc_admin_auth_failures_total: { reason: ADMIN_AUTH_REASONS },
  svc_address_limit_refusals_total: { door: ['api', 'portal_session'] satisfies Parameters<AuthEvents['addressLimited']>[0][] },
  svc_outbox_events_relayed_total: { path: ['relay', 'sweep'] },
  svc_delivery_slots: { state: ['healthy', 'degraded'] satisfies SlotState[] },
  svc_delivery_waiting: { where: ['here', 'deferred'] },
  svc_delivery_deferrals_total: { reason: ['webhook_limit', 'company_limit', 'degraded_limit', 'pool_reserve'] satisfies DeferReason[] },
  svc_fanout_routes_total: { source: ['held', 'read'] },
};

function buildCatalog(): Map<string, MetricInfo> {
  const gateway = catalogFromRegistry(createGatewayMetrics().registry, ['service']);
  const dispatcher = catalogFromRegistry(createDispatcherMetrics().registry, ['service']);
  const catalog = new Map(gateway);
  for (const [name, info] of dispatcher) {
    const same = catalog.get(name);
    // Shared names (the default process metrics) must mean the same thing in both services.
    if (same && same.type !== info.type) throw new Error(`${name} is a ${same.type} in the gateway and a ${info.type} in the dispatcher`);
    catalog.set(name, same ? { type: info.type, labels: new Set([...same.labels, ...info.labels]) } : info);
  }
  return catalog;
}

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}
interface RuleFile {
  groups: Array<{ name: string; rules: Rule[] }>;
}

interface Target {
  refId: string;
  expr: string;
  legendFormat?: string;
  datasource?: { type: string; uid: string };
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: Target[];
  panels?: Panel[];
}
interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  templating?: { list: unknown[] };
}

function findTool(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, name);
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}
// Without the tool its checks are skipped on a developer's machine, but fail under CI (CI=true, as
// .ci/run sets it): a CI run that skipped them would pass with broken alerts.
const underCi = ['1', 'true'].includes((process.env.CI ?? '').toLowerCase());
const required = (path: string | undefined, name: string): string => {
  if (path === undefined) throw new Error(`${name} is not on PATH: CI must install it (Debian's prometheus and prometheus-alertmanager, .ci/run)`);
  return path;
};
const promtool = findTool('promtool');
const withPromtool = promtool || underCi ? it : it.skip;
// Debian's prometheus-alertmanager package.
const amtool = findTool('amtool');
const withAmtool = amtool || underCi ? it : it.skip;

describe('metric names used by alerts and the dashboard', () => {
  const catalog = buildCatalog();
  const rules = (parse(read('infra/prometheus/alerts.yml')) as RuleFile).groups.flatMap((g) => g.rules);
  const dashboard = JSON.parse(read('infra/grafana/dashboards/svc-overview.json')) as Dashboard;
  const allPanels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
  const targets = allPanels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, ...t })));
  const check = (expr: string, labels: string[] = []) =>
    checkExpr(expr, { catalog, values: KNOWN_VALUES, templateLabels: labels });

  it('the catalogue holds both services, with the names issue 5 fixes', () => {
    expect(attemptResultsComplete && authReasonsComplete && adminAuthReasonsComplete).toBe(true);
    for (const name of [
      'svc_http_requests_total',
      'svc_http_request_duration_seconds',
      'svc_outbox_oldest_pending_age_seconds',
      'svc_webhook_deliveries_total',
      'svc_webhook_attempts_total',
      'svc_webhook_attempt_duration_seconds',
      'svc_event_to_delivery_seconds',
      'svc_queue_jobs',
      'svc_process_resident_memory_bytes',
      'svc_nodejs_eventloop_lag_p99_seconds',
    ]) {
      expect(catalog.has(name)).toBe(true);
    }
    expect(catalog.get('svc_http_request_duration_seconds')?.type).toBe('histogram');
    expect([...catalog.get('svc_webhook_deliveries_total')!.labels]).toEqual(expect.arrayContaining(['evento', 'outcome', 'service', ...TARGET_LABELS]));
  });

  it('the checker catches what it is there to catch', () => {
    // Without this, a checker that accepts everything would pass every test below.
    expect(check('sum(rate(svc_http_requests_total[5m]))')).toEqual([]);
    expect(check('rate(svc_http_request_duration_seconds_bucket{le="0.5"}[5m])')).toEqual([]);
    expect(check('up{job="dispatcher"} == 0')).toEqual([]);
    expect(check('sum(rate(svc_http_request_total[5m]))')).toEqual(['metric svc_http_request_total is in no registry']);
    expect(check('svc_http_request_duration_seconds')).toEqual(['metric svc_http_request_duration_seconds is in no registry']);
    expect(check('svc_queue_jobs_bucket')).toEqual(['metric svc_queue_jobs_bucket is in no registry']);
    expect(check('svc_webhook_attempts_total{outcome="success"}')).toEqual(['svc_webhook_attempts_total has no label outcome']);
    expect(check('svc_queue_jobs{state="wait"}')).toEqual([
      'svc_queue_jobs{state="wait"}: state is one of waiting, active, delayed, failed',
    ]);
    expect(check('up{job="dispatchers"}')[0]).toMatch(/job is one of gateway, dispatcher/);
    expect(check('sum by (rout) (rate(svc_http_requests_total[5m]))')[0]).toMatch(/grouping label rout/);
    expect(check('histogram_quantil(0.99, sum by (le) (rate(svc_event_to_delivery_seconds_bucket[5m])))')[0]).toMatch(
      /unknown function histogram_quantil/,
    );
    expect(check('sum by (queue) (svc_queue_jobs)', ['state'])[0]).toMatch(/template reads label state/);
  });

  it('every alert expression names existing metrics and labels', () => {
    expect(rules.length).toBeGreaterThanOrEqual(6);
    const problems = rules.flatMap((r) =>
      check(r.expr, templateLabels(Object.values(r.annotations ?? {}).join('\n'))).map((p) => `${r.alert}: ${p}`),
    );
    expect(problems).toEqual([]);
  });

  it('every dashboard query names existing metrics and labels, and its legend reads labels the query keeps', () => {
    expect(targets.length).toBeGreaterThanOrEqual(20);
    const problems = targets.flatMap((t) =>
      check(t.expr, templateLabels(t.legendFormat ?? '')).map((p) => `${t.panel} (${t.refId}): ${p}`),
    );
    expect(problems).toEqual([]);
  });

  it('the dashboard covers what SREs watch: every service metric is on it', () => {
    const used = new Set(
      targets.flatMap((t) => [...t.expr.matchAll(/svc_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|sum|count)$/, ''))),
    );
    const expected = [
      'svc_http_requests_total',
      'svc_http_request_duration_seconds',
      'svc_rate_limit_rejections_total',
      'svc_shipment_refusals_total',
      'svc_auth_failures_total',
      'svc_token_cache_lookups_total',
      'svc_outbox_pending',
      'svc_outbox_oldest_pending_age_seconds',
      'svc_outbox_events_written_total',
      'svc_outbox_events_relayed_total',
      'svc_shipments_created_total',
      'svc_webhook_deliveries_total',
      'svc_webhook_attempts_total',
      'svc_webhook_attempt_duration_seconds',
      'svc_event_to_delivery_seconds',
      'svc_queue_jobs',
      'svc_process_resident_memory_bytes',
      'svc_process_cpu_seconds_total',
      'svc_nodejs_eventloop_lag_p99_seconds',
      'svc_oldest_overdue_delivery_seconds',
      'svc_oldest_unfanned_event_seconds',
      'svc_reconciler_requeued_total',
      'svc_jobs_failed_total',
      'svc_delivery_slots',
      'svc_delivery_waiting',
      'svc_delivery_deferrals_total',
      'svc_fanout_routes_total',
      'svc_webhooks_degraded',
      'svc_retention_removed_total',
    ];
    expect(expected.filter((m) => !used.has(m))).toEqual([]);
  });
});

describe('the alert rule file', () => {
  const file = parse(read('infra/prometheus/alerts.yml')) as RuleFile;
  const rules = file.groups.flatMap((g) => g.rules);

  it('has the alerts issue 5 asks for, each with severity, summary, description and a for', () => {
    const names = rules.map((r) => r.alert);
    expect(names).toEqual(
      expect.arrayContaining([
        'WebhookDeliveryFailureRatioHigh',
        'WebhookQueueBacklogGrowing',
        'OutboxOldestEventTooOld',
        'GatewayHigh5xxRatio',
        'GatewayLatencyP99High',
        'TargetDown',
        'NoDispatcherRunning',
        'DeliveryOverdue',
        'EventNotFannedOut',
        'JobsFailing',
      ]),
    );
    expect(new Set(names).size).toBe(names.length);
    for (const r of rules) {
      expect({ alert: r.alert, severity: r.labels?.severity }).toEqual({ alert: r.alert, severity: expect.stringMatching(/^(critical|warning)$/) });
      expect(r.annotations?.summary?.length).toBeGreaterThan(10);
      expect(r.annotations?.description?.length).toBeGreaterThan(20);
      expect(r.for).toMatch(/^\d+[smh]$/);
    }
  });

  it('reads the series the way the issue describes', () => {
    const byName = new Map(rules.map((r) => [r.alert, r.expr]));
    expect(byName.get('GatewayLatencyP99High')).toMatch(/histogram_quantile\(0\.99,.*svc_http_request_duration_seconds_bucket/s);
    expect(byName.get('WebhookQueueBacklogGrowing')).toMatch(/deriv\(svc_queue_jobs\{state="waiting"\}\[10m\]\)\)\s*>\s*0/);
    expect(byName.get('WebhookQueueBacklogGrowing')).toMatch(/svc_queue_jobs\{state="waiting"\}\)\s*>\s*\d+/);
    expect(rules.find((r) => r.alert === 'WebhookQueueBacklogGrowing')?.for).toBe('10m');
    expect(byName.get('TargetDown')?.trim()).toBe('up == 0');
    expect(byName.get('OutboxOldestEventTooOld')).toMatch(/svc_outbox_oldest_pending_age_seconds/);
    expect(byName.get('GatewayHigh5xxRatio')).toMatch(/status=~"5\.\."/);
  });

  withPromtool('passes promtool check rules', () => {
    const out = execFileSync(required(promtool, 'promtool'), ['check', 'rules', join(root, 'infra/prometheus/alerts.yml')], { encoding: 'utf8' });
    expect(out).toMatch(new RegExp(`SUCCESS: ${rules.length} rules found`));
  });

  withPromtool('passes its unit tests (promtool test rules infra/prometheus/alerts.test.yml)', () => {
    const out = execFileSync(required(promtool, 'promtool'), ['test', 'rules', join(root, 'infra/prometheus/alerts.test.yml')], { encoding: 'utf8' });
    expect(out).toMatch(/SUCCESS/);
  });
});

describe('prometheus.yml', () => {
  it('scrapes the gateway, every dispatcher replica through DNS, and loads the alerts', () => {
    expect(prometheus.rule_files).toEqual(['alerts.yml']);
    const gateway = prometheus.scrape_configs.find((c) => c.job_name === 'gateway');
    expect(gateway?.static_configs?.[0]?.targets).toEqual(['gateway:9101']);
    const dispatcher = prometheus.scrape_configs.find((c) => c.job_name === 'dispatcher');
    expect(dispatcher?.static_configs).toBeUndefined();
    expect(dispatcher?.dns_sd_configs).toEqual([expect.objectContaining({ names: ['dispatcher'], type: 'A', port: 9102 })]);
  });

  it('sends alerts to the Alertmanager that compose runs', () => {
    expect(prometheus.alerting?.alertmanagers).toEqual([{ static_configs: [{ targets: ['alertmanager:9093'] }] }]);
    // On the stack's network (unpublished: its API would create silences for anyone reaching it).
    const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, { ports?: string[]; expose?: string[] }> };
    expect(compose.services.alertmanager?.expose).toContain('9093');
    expect(compose.services.alertmanager?.ports).toBeUndefined();
    // Scraped too, so that TargetDown says when alerts can no longer be sent.
    const job = prometheus.scrape_configs.find((c) => c.job_name === 'alertmanager');
    expect(job?.static_configs?.[0]?.targets).toEqual(['alertmanager:9093']);
  });

  withPromtool('passes promtool check config (the alerting section and the rule file included)', () => {
    const out = execFileSync(required(promtool, 'promtool'), ['check', 'config', join(root, 'infra/prometheus/prometheus.yml')], { encoding: 'utf8' });
    expect(out).toMatch(/SUCCESS: .*prometheus\.yml is valid/);
  });
});

describe('Grafana provisioning', () => {
  interface DatasourceFile {
    apiVersion: number;
    datasources: Array<{ name: string; uid: string; type: string; url: string; isDefault?: boolean }>;
  }
  interface ProviderFile {
    apiVersion: number;
    providers: Array<{ name: string; type: string; options: { path: string } }>;
  }
  const datasources = parse(read('infra/grafana/provisioning/datasources/prometheus.yml')) as DatasourceFile;
  const providers = parse(read('infra/grafana/provisioning/dashboards/svc.yml')) as ProviderFile;
  const compose = parse(read('docker-compose.yml')) as { services: Record<string, { volumes?: string[] }> };

  it('provisions the Prometheus datasource that compose runs', () => {
    expect(datasources.apiVersion).toBe(1);
    const ds = datasources.datasources.find((d) => d.type === 'prometheus');
    expect(ds).toEqual(expect.objectContaining({ uid: 'prometheus', url: 'http://prometheus:9090', isDefault: true }));
    expect(compose.services.prometheus).toBeDefined();
  });

  it('loads dashboards from the directory compose mounts infra/grafana/dashboards at', () => {
    expect(providers.apiVersion).toBe(1);
    const provider = providers.providers[0]!;
    expect(provider.type).toBe('file');
    const volumes = compose.services.grafana?.volumes ?? [];
    expect(volumes).toContain(`./infra/grafana/dashboards:${provider.options.path}:ro`);
    expect(volumes).toContain('./infra/grafana/provisioning:/etc/grafana/provisioning:ro');
  });

  it('the dashboard is valid JSON with unique ids, panels on the grid, every query on the provisioned datasource', () => {
    const dashboard = JSON.parse(read('infra/grafana/dashboards/svc-overview.json')) as Dashboard;
    const uid = datasources.datasources[0]!.uid;
    expect(dashboard.uid).toMatch(/^[A-Za-z0-9_-]{1,40}$/);
    expect(dashboard.title).toBeTruthy();
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    const panels = dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels) {
      expect(p.gridPos.x + p.gridPos.w).toBeLessThanOrEqual(24);
      if (p.type === 'row') continue;
      expect({ panel: p.title, datasource: p.datasource }).toEqual({ panel: p.title, datasource: { type: 'prometheus', uid } });
      expect(p.targets?.length).toBeGreaterThan(0);
      for (const t of p.targets ?? []) {
        expect({ panel: p.title, datasource: t.datasource?.uid ?? uid }).toEqual({ panel: p.title, datasource: uid });
        expect(t.expr.trim()).not.toBe('');
      }
    }
    // No two panels overlap on the grid.
    const cells = new Set<string>();
    for (const p of panels) {
      for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x++) {
        for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y++) {
          const key = `${x},${y}`;
          expect({ panel: p.title, overlaps: cells.has(key) }).toEqual({ panel: p.title, overlaps: false });
          cells.add(key);
        }
      }
    }
  });
});

describe('the runbook (docs/runbook.md)', () => {
  const rules = (parse(read('infra/prometheus/alerts.yml')) as RuleFile).groups.flatMap((g) => g.rules).filter((r) => r.alert);
  const runbook = read('docs/runbook.md');
  const heads = headings(runbook);
  const sections = heads.filter((h) => h.level === 2);
  const sectionText = (slug: string): string => {
    const i = sections.findIndex((h) => h.slug === slug);
    return runbook.slice(sections[i]!.at, sections[i + 1]?.at ?? runbook.length);
  };

  it('the slugs are GitHub\'s', () => {
    expect(githubSlug('DeliveryOverdue')).toBe('deliveryoverdue');
    expect(githubSlug('Fair sharing: no tenant stalls another')).toBe('fair-sharing-no-tenant-stalls-another');
    expect(githubSlug('Running the whole stack with Docker Compose')).toBe('running-the-whole-stack-with-docker-compose');
    expect(headings('# A\n```\n# not a heading\n```\n## A').map((h) => h.slug)).toEqual(['a', 'a-1']);
  });

  it('every alert has a runbook_url, relative to the repository, at the section headed by its own name', () => {
    expect(rules.length).toBeGreaterThanOrEqual(10);
    for (const r of rules) {
      const url = r.annotations?.runbook_url ?? '';
      const m = url.match(/^docs\/runbook\.md#([a-z0-9_-]+)$/);
      expect({ alert: r.alert, url, form: Boolean(m) }).toEqual({ alert: r.alert, url, form: true });
      const section = sections.find((h) => h.slug === m![1]);
      expect({ alert: r.alert, heading: section?.text }).toEqual({ alert: r.alert, heading: r.alert });
    }
  });

  it('has one section per alert and no other, each saying what it means, what to check and what to do', () => {
    expect(sections.map((h) => h.text).sort()).toEqual(rules.map((r) => r.alert!).sort());
    for (const h of sections) {
      const text = sectionText(h.slug);
      for (const part of ['**What it means.**', '**What to check.**', '**What to do.**']) {
        expect({ alert: h.text, part, present: text.includes(part) }).toEqual({ alert: h.text, part, present: true });
      }
    }
  });

  it('names only metrics the services export, and its promql blocks select existing metrics and labels', () => {
    const catalog = buildCatalog();
    const named = [...new Set([...runbook.matchAll(/\bsvc_[a-z0-9_]+/g)].map((m) => m[0]))];
    expect(named.length).toBeGreaterThanOrEqual(15);
    expect(named.filter((n) => !catalog.has(n) && !catalog.has(n.replace(/_(bucket|sum|count)$/, '')))).toEqual([]);
    const blocks = [...runbook.matchAll(/```promql\n([\s\S]*?)```/g)].map((m) => m[1]!.trim());
    expect(blocks.length).toBeGreaterThanOrEqual(10);
    const problems = blocks.flatMap((expr) => checkExpr(expr, { catalog, values: KNOWN_VALUES, templateLabels: [] }));
    expect(problems).toEqual([]);
  });

  it('docs/operations.md lists every alert in its Alerts table, and its "Running in production" links the table and the runbook', () => {
    const operations = read('docs/operations.md');
    const table = operations.slice(operations.indexOf('| alert | severity |')).split(/\n\s*\n/)[0]!;
    expect([...table.matchAll(/^\| ([A-Z]\w+) \|/gm)].map((m) => m[1]).sort()).toEqual(rules.map((r) => r.alert).sort());
    const operationsHeads = headings(operations);
    const at = operationsHeads.findIndex((h) => h.text === 'Running in production');
    expect(at).toBeGreaterThan(0);
    const section = operations.slice(operationsHeads[at]!.at, operationsHeads[at + 1]?.at);
    expect(section).toContain('(runbook.md)');
    expect(section).toMatch(/noeviction/);
    for (const [, anchor] of section.matchAll(/\]\(#([^)]+)\)/g)) {
      expect({ anchor, exists: operationsHeads.some((h) => h.slug === anchor) }).toEqual({ anchor, exists: true });
    }
    expect(section).toContain('](#alerts-infraprometheusalertsyml)');
  });

  it('links only to anchors that exist, in itself and in the other docs', () => {
    const own = new Set(heads.map((h) => h.slug));
    for (const [, file, anchor] of runbook.matchAll(/\]\(((?:[\w.-]+\.md)?)#([^)]+)\)/g)) {
      const known = file ? new Set(headings(read(`docs/${file}`)).map((h) => h.slug)) : own;
      expect({ link: `${file}#${anchor}`, exists: known.has(anchor!) }).toEqual({ link: `${file}#${anchor}`, exists: true });
    }
  });
});

describe('Alertmanager (infra/alertmanager/alertmanager.yml)', () => {
  interface Route {
    receiver?: string;
    matchers?: string[];
    routes?: Route[];
  }
  interface AlertmanagerConfig {
    route: Route;
    receivers: Array<{ name: string }>;
    inhibit_rules?: Array<{ source_matchers: string[]; target_matchers: string[] }>;
  }
  const config = parse(read('infra/alertmanager/alertmanager.yml')) as AlertmanagerConfig;
  const alertNames = (parse(read('infra/prometheus/alerts.yml')) as RuleFile).groups.flatMap((g) => g.rules.map((r) => r.alert));

  it('routes every alert to a receiver it declares, and inhibits by alert names that exist', () => {
    const names = new Set(config.receivers.map((r) => r.name));
    const used = (r: Route): string[] => [...(r.receiver ? [r.receiver] : []), ...(r.routes ?? []).flatMap(used)];
    expect(config.route.receiver).toBeDefined();
    expect(used(config.route).filter((n) => !names.has(n))).toEqual([]);
    const matched = (config.inhibit_rules ?? [])
      .flatMap((i) => [...i.source_matchers, ...i.target_matchers])
      .flatMap((m) => m.match(/^alertname=~?"(.*)"$/)?.[1]?.split('|') ?? []);
    expect(matched.length).toBeGreaterThan(0);
    expect(matched.filter((n) => !alertNames.includes(n))).toEqual([]);
  });

  withAmtool('passes amtool check-config', () => {
    const out = execFileSync(required(amtool, 'amtool'), ['check-config', join(root, 'infra/alertmanager/alertmanager.yml')], { encoding: 'utf8' });
    expect(out).toMatch(/SUCCESS/);
  });
});
