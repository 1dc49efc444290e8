import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import ts from 'typescript';
import { parseAllDocuments } from 'yaml';
import { loadGatewayConfig } from '../../services/gateway/src/config';
import { loadDispatcherConfig } from '../../services/dispatcher/src/config';
import { createDispatcherMetrics } from '../../services/dispatcher/src/observability/dispatcher-metrics';

/**
 * infra/kubernetes as an operator renders it (`kubectl kustomize`, Debian's kubectl), checked as
 * files: no cluster runs where the tests do. Every object against the schemas of a pinned
 * Kubernetes version (test/infra/kubernetes-schemas.mjs) and against the same packages' types for
 * fields the schemas do not know, then what the objects must agree on with the code: the settings
 * the services read, the production refusals, ports, probes, the stop deadline and the sizing.
 */

const root = join(__dirname, '../..');
const read = (path: string): string => readFileSync(join(root, path), 'utf8');

const findTool = (name: string): string | undefined =>
  (process.env.PATH ?? '').split(delimiter).map((dir) => join(dir, name)).find((candidate) => existsSync(candidate));
// Skipped without kubectl on a developer's machine; under CI (CI=true, .ci/run) a missing kubectl
// fails, as .ci/run installs it: a run that skipped the rendering would pass with broken manifests.
const underCi = ['1', 'true'].includes((process.env.CI ?? '').toLowerCase());
/** kubectl, when its kustomize is v5 (Debian's kubernetes-client, 1.20, embeds v2, which reads none of these files). */
function findKubectl(): string | undefined {
  const path = findTool('kubectl');
  if (!path) return undefined;
  const version = execFileSync(path, ['version', '--client'], { encoding: 'utf8' });
  return /^Kustomize Version: v5\./m.test(version) ? path : undefined;
}
const kubectl = findKubectl();
const describeRendered = kubectl || underCi ? describe : describe.skip;

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { secretKeyRef?: { name: string; key: string }; configMapKeyRef?: { name: string; key: string } };
}
interface Probe {
  httpGet?: { path: string; port: string | number };
  periodSeconds?: number;
  failureThreshold?: number;
}
interface Container {
  name: string;
  image: string;
  command?: string[];
  ports?: Array<{ name?: string; containerPort: number }>;
  env?: EnvVar[];
  envFrom?: Array<{ configMapRef?: { name: string }; secretRef?: { name: string } }>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
  securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean };
}
interface PodTemplate {
  metadata?: { labels?: Record<string, string> };
  spec: { containers: Container[]; terminationGracePeriodSeconds?: number; restartPolicy?: string; securityContext?: { runAsNonRoot?: boolean } };
}
interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  data?: Record<string, string>;
  spec?: Record<string, unknown>;
}
interface NetworkPolicyRule {
  from?: Array<{ podSelector?: { matchLabels?: Record<string, string> }; namespaceSelector?: unknown; ipBlock?: unknown }>;
  ports?: Array<{ port: string | number; protocol?: string }>;
}
interface ScaledObjectSpec {
  scaleTargetRef: { apiVersion?: string; kind?: string; name: string };
  minReplicaCount: number;
  maxReplicaCount: number;
  pollingInterval?: number;
  fallback?: { failureThreshold: number; replicas: number };
  triggers: Array<{ type: string; metricType?: string; metadata: Record<string, string> }>;
}

function render(dir: string): K8sObject[] {
  if (!kubectl) throw new Error('no kubectl with kustomize v5 on PATH: CI must bring one (.ci/run)');
  const yaml = execFileSync(kubectl, ['kustomize', join(root, dir)], { encoding: 'utf8' });
  return parseAllDocuments(yaml).map((d) => d.toJSON() as K8sObject).filter(Boolean);
}

/** Runs kubernetes-schemas.mjs (the packages are ES modules only, which jest cannot load). */
function schemaErrors(objects: unknown[]): Array<{ kind: string; name: string; errors: string[] }> {
  const out = execFileSync(process.execPath, [join(__dirname, 'kubernetes-schemas.mjs')], { input: JSON.stringify(objects), encoding: 'utf8', cwd: root });
  return JSON.parse(out) as Array<{ kind: string; name: string; errors: string[] }>;
}

/** The module of an object's model and type: the core group at `v1`, KEDA's in its own package. */
const modelModule = (o: K8sObject): string =>
  o.apiVersion === 'keda.sh/v1alpha1' ? `@kubernetes-models/keda/keda.sh/v1alpha1/${o.kind}` : `kubernetes-models/${o.apiVersion}/${o.kind}`;

/**
 * Fields the schemas do not know: their validators allow any extra property, so a misspelt key
 * (`readinesProbe`) would pass them and be dropped by the API server. The same packages' TypeScript
 * types do know every field, so each object is type-checked as an object literal of its type, where
 * an unknown property is an error at any depth.
 */
function unknownFieldErrors(objects: K8sObject[]): string[] {
  const file = join(__dirname, '__rendered_kubernetes_objects__.ts');
  const lines = objects.map((o, i) => `import type { I${o.kind} as T${i} } from '${modelModule(o)}';\nexport const o${i}: T${i} = ${JSON.stringify(o)};`);
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const source = ts.createSourceFile(file, lines.join('\n'), ts.ScriptTarget.ES2022, true);
  const getSourceFile = host.getSourceFile.bind(host);
  const fileExists = host.fileExists.bind(host);
  host.getSourceFile = (name, ...rest) => (name === file ? source : getSourceFile(name, ...rest));
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const at = d.file === source && d.start !== undefined ? source.getLineAndCharacterOfPosition(d.start).line : -1;
    const object = objects[Math.floor(at / 2)];
    return `${object ? `${object.kind} ${object.metadata.name}` : d.file?.fileName ?? '?'}: ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

const byKind = (objects: K8sObject[], kind: string, name: string): K8sObject => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in the rendering`);
  return found;
};
const template = (deployment: K8sObject): PodTemplate => (deployment.spec as { template: PodTemplate }).template;
const container = (deployment: K8sObject): Container => {
  const c = template(deployment).spec.containers[0];
  if (!c) throw new Error(`${deployment.metadata.name} has no container`);
  return c;
};

/** Kubernetes memory quantities in bytes (the suffixes the manifests use). */
function bytes(quantity: string | undefined): number {
  const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|K|M|G)?$/.exec(quantity ?? '');
  if (!m) throw new Error(`not a memory quantity: ${quantity}`);
  const unit = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, K: 1e3, M: 1e6, G: 1e9 }[m[2] ?? ''] ?? 1;
  return Number(m[1]) * unit;
}
const MB = 1e6;

/** A deployment's environment: its ConfigMaps (envFrom) then its own entries, secret references kept apart. */
function environment(deployment: K8sObject, objects: K8sObject[]): { values: Record<string, string>; secrets: Record<string, { name: string; key: string }> } {
  const c = container(deployment);
  const values: Record<string, string> = {};
  const secrets: Record<string, { name: string; key: string }> = {};
  for (const from of c.envFrom ?? []) {
    expect({ deployment: deployment.metadata.name, secretRef: from.secretRef }).toEqual({ deployment: deployment.metadata.name, secretRef: undefined });
    Object.assign(values, byKind(objects, 'ConfigMap', from.configMapRef!.name).data);
  }
  for (const e of c.env ?? []) {
    if (e.valueFrom?.secretKeyRef) secrets[e.name] = e.valueFrom.secretKeyRef;
    else if (e.value !== undefined) values[e.name] = e.value;
    else throw new Error(`${e.name}: neither a value nor a secret`);
  }
  return { values, secrets };
}

/** The environment names a config loader reads, recorded as it reads them (nothing guessed from its source). */
function namesRead(load: (env: Record<string, string | undefined>) => unknown, env: Record<string, string>): Set<string> {
  const names = new Set<string>();
  const recorder = new Proxy(env, {
    get(target, key) {
      if (typeof key === 'string') names.add(key);
      return target[key as string];
    },
  });
  load(recorder);
  return names;
}

/** The first-column names of docs/operations.md's settings table (`| variable | default | meaning |`). */
function documentedSettings(): Set<string> {
  const doc = read('docs/operations.md');
  const table = doc.slice(doc.indexOf('| variable |')).split(/\n(?!\|)/)[0]!;
  return new Set(table.split('\n').flatMap((row) => [...(row.split('|')[1] ?? '').matchAll(/\b[A-Z][A-Z0-9_]{2,}\b/g)].map((m) => m[0])));
}

/** What an operator puts in the svc-secrets Secret, for loading the configs as the pods would. */
const SECRET_VALUES: Record<string, string> = {
  DATABASE_URL: 'postgres://svc:pw@postgres.svc.svc.cluster.local:5432/svc',
  REDIS_URL: 'redis://:pw@redis.svc.svc.cluster.local:6379',
  ADMIN_TOKEN: 'Zq3vYp8sK1tWm6xR2bN9cH4dJ7fL0gA5eU+iO/yT=',
  SECRETS_KEY: Buffer.alloc(32, 9).toString('base64'),
};
const SECRET_KEYS_OF = { gateway: ['ADMIN_TOKEN', 'DATABASE_URL', 'REDIS_URL', 'SECRETS_KEY'], dispatcher: ['DATABASE_URL', 'REDIS_URL', 'SECRETS_KEY'] };

/**
 * The sizing's sources (docs/operations.md, Capacity you can plan, and bench/README.md): a
 * dispatcher's base memory and what each send in flight adds at most; the peaks measured on Node 24
 * (5c3ddd6, 2 December 2026).
 */
const DISPATCHER_BASE_MB = 120;
const PER_SEND_IN_FLIGHT_MB = 0.15;
const DISPATCHER_PEAK_RSS_MB = 292;
const GATEWAY_PEAK_RSS_MB = 127;

describeRendered('infra/kubernetes, rendered with kubectl kustomize (overlays/production)', () => {
  let services: K8sObject[];
  let migrate: K8sObject[];
  let all: K8sObject[];
  beforeAll(() => {
    services = render('infra/kubernetes/overlays/production');
    migrate = render('infra/kubernetes/overlays/production/migrate');
    all = [...services, ...migrate];
  });

  it('holds every part: gateway and dispatcher, their Services, autoscalers, budgets and policies; migrations apart', () => {
    // A generated ConfigMap's name ends with a hash of its values.
    const names = (list: K8sObject[]) => list.map((o) => `${o.kind}/${o.kind === 'ConfigMap' ? o.metadata.name.replace(/-[a-z0-9]{10}$/, '') : o.metadata.name}`).sort();
    expect(names(services)).toEqual([
      'ConfigMap/svc-common',
      'ConfigMap/svc-gateway-settings',
      'Deployment/svc-dispatcher',
      'Deployment/svc-gateway',
      'HorizontalPodAutoscaler/svc-gateway',
      'NetworkPolicy/svc-dispatcher',
      'NetworkPolicy/svc-gateway',
      'PodDisruptionBudget/svc-dispatcher',
      'PodDisruptionBudget/svc-gateway',
      'ScaledObject/svc-dispatcher',
      'Service/svc-gateway',
      'Service/svc-gateway-admin',
    ]);
    expect(names(migrate)).toEqual(['Job/svc-migrate']);
    expect(all.filter((o) => o.metadata.namespace !== 'svc').map((o) => o.metadata.name)).toEqual([]);
  });

  it('validates every object against the schemas of Kubernetes v1.36.0 and KEDA v2 (ajv), and would reject a wrong one', () => {
    expect(schemaErrors(all).filter((r) => r.errors.length > 0)).toEqual([]);
    // The validators do reject: a port as text, a replica floor as text, a kind no schema has.
    const broken = structuredClone(byKind(services, 'Deployment', 'svc-gateway'));
    (template(broken).spec.containers[0]!.ports![0] as { containerPort: unknown }).containerPort = 'http';
    const so = structuredClone(byKind(services, 'ScaledObject', 'svc-dispatcher'));
    (so.spec as { minReplicaCount: unknown }).minReplicaCount = 'two';
    const results = schemaErrors([broken, so, { apiVersion: 'example.com/v1', kind: 'Nothing', metadata: { name: 'x' } }]);
    expect(results.map((r) => r.errors.length > 0)).toEqual([true, true, true]);
    expect(results[0]!.errors.join()).toMatch(/containerPort must be integer/);
    expect(results[1]!.errors.join()).toMatch(/minReplicaCount must be integer/);
  });

  it('names no field the types of those versions do not have (a misspelt key is refused, not dropped)', () => {
    // One compilation for all (the checker is the slow part): the rendered objects, and a copy of
    // one with a misspelt key, which must be the one error.
    const typo = structuredClone(byKind(services, 'Deployment', 'svc-dispatcher'));
    const c = template(typo).spec.containers[0] as unknown as Record<string, unknown>;
    c.readinesProbe = c.readinessProbe;
    delete c.readinessProbe;
    const errors = unknownFieldErrors([...all, typo]);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^Deployment svc-dispatcher: .*readinesProbe.{0,3} does not exist in type 'IContainer'/);
  }, 60_000);

  it('sets only settings the services read, each in docs/operations.md, and the image\'s NODE_FLAGS', () => {
    const documented = documentedSettings();
    for (const [svc, load] of [['gateway', loadGatewayConfig], ['dispatcher', loadDispatcherConfig]] as const) {
      const { values, secrets } = environment(byKind(services, 'Deployment', `svc-${svc}`), services);
      const env = { ...values, ...Object.fromEntries(Object.keys(secrets).map((k) => [k, SECRET_VALUES[k] ?? ''])) };
      const reads = namesRead(load, env);
      // NODE_FLAGS is the image's (its CMD puts it on node's command line), not a service's setting.
      expect(read('Dockerfile')).toContain('exec node $NODE_FLAGS dist/main.js');
      const names = Object.keys(env).filter((k) => k !== 'NODE_FLAGS');
      expect({ svc, unread: names.filter((k) => !reads.has(k)) }).toEqual({ svc, unread: [] });
      expect({ svc, undocumented: names.filter((k) => !documented.has(k)) }).toEqual({ svc, undocumented: [] });
    }
    // The migrate Job reads DATABASE_URL only (packages/platform/src/db/migrate.main.ts).
    const job = byKind(migrate, 'Job', 'svc-migrate');
    expect((container(job).env ?? []).map((e) => e.name)).toEqual(['DATABASE_URL']);
    expect(read('packages/platform/src/db/migrate.main.ts')).toContain('process.env.DATABASE_URL');
  });

  it('satisfies the production refusals: NODE_ENV=production, secrets from the Secret, no test-only setting', () => {
    for (const svc of ['gateway', 'dispatcher'] as const) {
      const { values, secrets } = environment(byKind(services, 'Deployment', `svc-${svc}`), services);
      expect(values.NODE_ENV).toBe('production');
      // The probes and Prometheus reach the metrics port on the pod's address.
      expect(values.METRICS_HOST).toBe('0.0.0.0');
      // Every secret comes from the Secret, under its own name, and none is written in the objects.
      expect(Object.keys(secrets).sort()).toEqual(SECRET_KEYS_OF[svc]);
      for (const [name, ref] of Object.entries(secrets)) expect({ name, ref }).toEqual({ name, ref: { name: 'svc-secrets', key: name } });
      for (const name of ['ADMIN_TOKEN', 'SECRETS_KEY', 'DATABASE_URL', 'REDIS_URL', 'DISPATCH_ALLOW_CIDRS', 'ADMIN_ON_PUBLIC_PORT', 'NODE_EXTRA_CA_CERTS']) {
        expect({ svc, name, literal: name in values }).toEqual({ svc, name, literal: false });
      }
      const env = { ...values, ...Object.fromEntries(SECRET_KEYS_OF[svc].map((k) => [k, SECRET_VALUES[k]!])) };
      const config = svc === 'gateway' ? loadGatewayConfig(env) : loadDispatcherConfig(env);
      expect(config.production).toBe(true);
      // Only the warning the NetworkPolicy answers: ADMIN_PORT on every interface of the pod.
      expect(config.startWarnings.map((w) => w.setting)).toEqual(svc === 'gateway' ? ['ADMIN_HOST'] : []);
      // Without the Secret's keys production refuses: the refusals are what the Secret satisfies.
      expect(() => (svc === 'gateway' ? loadGatewayConfig(values) : loadDispatcherConfig(values))).toThrow(/SECRETS_KEY: required with NODE_ENV=production/);
    }
    const gateway = environment(byKind(services, 'Deployment', 'svc-gateway'), services);
    expect(() => loadGatewayConfig({ ...gateway.values, SECRETS_KEY: SECRET_VALUES.SECRETS_KEY, ADMIN_TOKEN: 'short' })).toThrow(/ADMIN_TOKEN: must be at least 32 characters/);
  });

  it('listens where the Services, probes and Prometheus look: the config\'s ports, /readyz and /healthz on the metrics port', () => {
    for (const svc of ['gateway', 'dispatcher'] as const) {
      const deployment = byKind(services, 'Deployment', `svc-${svc}`);
      const { values, secrets } = environment(deployment, services);
      const env = { ...values, ...Object.fromEntries(Object.keys(secrets).map((k) => [k, SECRET_VALUES[k]!])) };
      const c = container(deployment);
      const ports = Object.fromEntries((c.ports ?? []).map((p) => [p.name, p.containerPort]));
      if (svc === 'gateway') {
        const config = loadGatewayConfig(env);
        expect(ports).toEqual({ http: config.port, admin: config.adminPort, metrics: config.metricsPort });
      } else {
        expect(ports).toEqual({ metrics: loadDispatcherConfig(env).metricsPort });
      }
      expect(c.readinessProbe?.httpGet).toEqual({ path: '/readyz', port: 'metrics' });
      expect(c.livenessProbe?.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
      expect(c.startupProbe?.httpGet).toEqual({ path: '/healthz', port: 'metrics' });
      const annotations = (template(deployment).metadata as { annotations?: Record<string, string> }).annotations ?? {};
      expect(annotations['prometheus.io/port']).toBe(String(ports.metrics));
      // The pod's labels are what its Deployment, Services, budget and policies select.
      expect(template(deployment).metadata?.labels).toEqual(expect.objectContaining((deployment.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels));
      expect(template(deployment).spec.securityContext?.runAsNonRoot).toBe(true);
      expect(c.securityContext).toEqual(expect.objectContaining({ readOnlyRootFilesystem: true, allowPrivilegeEscalation: false }));
    }
    const gatewayPods = template(byKind(services, 'Deployment', 'svc-gateway')).metadata?.labels ?? {};
    for (const [name, port] of [['svc-gateway', 'http'], ['svc-gateway-admin', 'admin']] as const) {
      const spec = byKind(services, 'Service', name).spec as { selector: Record<string, string>; ports: Array<{ targetPort: string }> };
      expect(gatewayPods).toEqual(expect.objectContaining(spec.selector));
      expect(spec.ports.map((p) => p.targetPort)).toEqual([port]);
    }
  });

  it('opens the admin port to this namespace only, the public port to all, the metrics ports to the namespace and monitoring', () => {
    const gateway = byKind(services, 'NetworkPolicy', 'svc-gateway').spec as { podSelector: { matchLabels: Record<string, string> }; policyTypes: string[]; ingress: NetworkPolicyRule[] };
    expect(gateway.policyTypes).toEqual(['Ingress']);
    expect(gateway.podSelector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'svc-gateway' });
    const opening = (port: string) => gateway.ingress.filter((r) => (r.ports ?? []).length === 0 || r.ports!.some((p) => p.port === port));
    // Only one rule opens the admin port, and its only peer is "any pod of this namespace":
    // a podSelector alone, no namespaceSelector or ipBlock, no rule without ports.
    expect(opening('admin')).toEqual([{ from: [{ podSelector: {} }], ports: [{ port: 'admin', protocol: 'TCP' }] }]);
    expect(opening('http')).toEqual([{ ports: [{ port: 'http', protocol: 'TCP' }] }]);
    const monitoring = { podSelector: {} };
    expect(opening('metrics')).toEqual([{ from: [monitoring, { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }], ports: [{ port: 'metrics', protocol: 'TCP' }] }]);
    const dispatcher = byKind(services, 'NetworkPolicy', 'svc-dispatcher').spec as { ingress: NetworkPolicyRule[] };
    expect(dispatcher.ingress.flatMap((r) => (r.ports ?? [{ port: 'any' }]).map((p) => p.port))).toEqual(['metrics']);
  });

  it('gives every pod a stop grace longer than its preStop pause plus SHUTDOWN_TIMEOUT_MS', () => {
    for (const svc of ['gateway', 'dispatcher'] as const) {
      const deployment = byKind(services, 'Deployment', `svc-${svc}`);
      const { values } = environment(deployment, services);
      const shutdownSeconds = Number(values.SHUTDOWN_TIMEOUT_MS) / 1000;
      expect(shutdownSeconds).toBeGreaterThan(0);
      const preStop = container(deployment).lifecycle?.preStop?.exec?.command ?? [];
      const pauseSeconds = preStop[0] === 'sleep' ? Number(preStop[1]) : 0;
      expect({ svc, preStop }).toEqual({ svc, preStop: svc === 'gateway' ? ['sleep', '5'] : [] });
      // A send gives up at 5 s (webhook-sender's DEFAULT_TIMEOUT_MS), so in-flight deliveries end within the deadline.
      expect(shutdownSeconds).toBeGreaterThan(5);
      const grace = template(deployment).spec.terminationGracePeriodSeconds ?? 30;
      expect({ svc, grace, enough: grace >= pauseSeconds + shutdownSeconds + 10 }).toEqual({ svc, grace, enough: true });
    }
  });

  it('sizes memory from the measured figures: a base plus a figure per send in flight; heap bounds as start:prod', () => {
    const dispatcher = byKind(services, 'Deployment', 'svc-dispatcher');
    const { values } = environment(dispatcher, services);
    const { maxInFlight } = loadDispatcherConfig({ ...values, SECRETS_KEY: SECRET_VALUES.SECRETS_KEY });
    const d = container(dispatcher).resources!;
    expect(bytes(d.limits?.memory)).toBeGreaterThanOrEqual((DISPATCHER_BASE_MB + maxInFlight * PER_SEND_IN_FLIGHT_MB) * MB);
    expect(bytes(d.requests?.memory)).toBeGreaterThanOrEqual(DISPATCHER_PEAK_RSS_MB * MB);
    const g = container(byKind(services, 'Deployment', 'svc-gateway')).resources!;
    expect(bytes(g.requests?.memory)).toBeGreaterThanOrEqual(GATEWAY_PEAK_RSS_MB * MB);
    expect(bytes(g.limits?.memory)).toBeGreaterThan(bytes(g.requests?.memory));
    for (const r of [d, g]) expect(r.requests?.cpu).toBe('1');
    // The same heap bounds as package.json's start:prod gives each service's node.
    const startProd = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts['start:prod']!;
    for (const svc of ['gateway', 'dispatcher'] as const) {
      const flags = /exec node ((?:--\S+ )+)services\/(\w+)\/dist\/main\.js/g;
      const bySvc = Object.fromEntries([...startProd.matchAll(flags)].map((m) => [m[2], m[1]!.trim()]));
      expect(environment(byKind(services, 'Deployment', `svc-${svc}`), services).values.NODE_FLAGS).toBe(bySvc[svc]);
    }
  });

  it('scales gateways on CPU and dispatchers with KEDA on waiting plus due jobs, within the documented floor and ceiling', () => {
    const hpa = byKind(services, 'HorizontalPodAutoscaler', 'svc-gateway').spec as {
      scaleTargetRef: { kind: string; name: string };
      minReplicas: number;
      maxReplicas: number;
      metrics: Array<{ type: string; resource?: { name: string; target: { type: string } } }>;
    };
    expect(hpa.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'svc-gateway' });
    expect(hpa.metrics.map((m) => [m.type, m.resource?.name, m.resource?.target.type])).toEqual([['Resource', 'cpu', 'Utilization']]);
    expect(hpa.minReplicas).toBeGreaterThanOrEqual(2);

    const so = byKind(services, 'ScaledObject', 'svc-dispatcher').spec as unknown as ScaledObjectSpec;
    expect(so.scaleTargetRef).toEqual({ apiVersion: 'apps/v1', kind: 'Deployment', name: 'svc-dispatcher' });
    // Never below two (one for the load at rest, one for failover): no scale to zero.
    expect(so.minReplicaCount).toBeGreaterThanOrEqual(2);
    expect(so.maxReplicaCount).toBeGreaterThan(so.minReplicaCount);
    // KEDA refuses a fallback beside a CPU trigger (its CheckFallbackValid).
    expect(so.fallback).toBeUndefined();
    // Queue depth, and CPU, which holds the replicas that caught up while they stay busy.
    expect(so.triggers.map((t) => t.type)).toEqual(['prometheus', 'cpu']);
    expect(so.triggers[1]).toEqual({ type: 'cpu', metricType: 'Utilization', metadata: { value: '70' } });
    const [trigger] = so.triggers;
    expect(trigger!.metricType).toBe('AverageValue');
    const meta = trigger!.metadata;
    expect(Object.keys(meta).sort()).toEqual(['ignoreNullValues', 'query', 'serverAddress', 'threshold']);
    expect(meta.serverAddress).toMatch(/^https?:\/\/[\w.-]+(:\d+)?$/);
    expect(meta.threshold).toMatch(/^\d+$/);
    expect(meta.ignoreNullValues).toBe('false');
    // Waiting jobs plus delayed jobs already due, both queues, of this namespace's dispatchers.
    expect(meta.query).toContain('svc_queue_jobs{service="dispatcher",namespace="svc",state="waiting"}');
    expect(meta.query).toContain('svc_queue_delayed_due_jobs{service="dispatcher",namespace="svc"}');
    // Every metric the query names is one the dispatcher exposes, of the labels it uses.
    const registry = createDispatcherMetrics().registry;
    for (const name of meta.query!.match(/\bsvc_\w+/g) ?? []) expect({ name, exposed: registry.getSingleMetric(name) !== undefined }).toEqual({ name, exposed: true });

    // The figures are the ones docs/operations.md derives (its Kubernetes section's sizing table).
    const doc = read('docs/operations.md');
    const section = doc.slice(doc.indexOf('## Kubernetes'));
    for (const figure of [
      `| dispatcher replicas (KEDA) | ${so.minReplicaCount} to ${so.maxReplicaCount} |`,
      `| KEDA threshold, jobs per replica | ${meta.threshold} |`,
      `| gateway replicas (HPA on CPU) | ${hpa.minReplicas} to ${hpa.maxReplicas} |`,
    ]) expect({ figure, inDocs: section.includes(figure) }).toEqual({ figure, inDocs: true });
  });

  it('keeps a PodDisruptionBudget per Deployment that leaves replicas serving through a drain', () => {
    for (const [svc, floor] of [['gateway', (byKind(services, 'HorizontalPodAutoscaler', 'svc-gateway').spec as { minReplicas: number }).minReplicas], ['dispatcher', (byKind(services, 'ScaledObject', 'svc-dispatcher').spec as unknown as ScaledObjectSpec).minReplicaCount]] as const) {
      const pdb = byKind(services, 'PodDisruptionBudget', `svc-${svc}`).spec as { maxUnavailable: number; selector: { matchLabels: Record<string, string> } };
      expect(template(byKind(services, 'Deployment', `svc-${svc}`)).metadata?.labels).toEqual(expect.objectContaining(pdb.selector.matchLabels));
      expect(pdb.maxUnavailable).toBeLessThan(floor);
    }
  });

  it('migrates once per release with the gateway image of the same release, as compose\'s migrate does', () => {
    const job = byKind(migrate, 'Job', 'svc-migrate');
    const c = container(job);
    expect(c.command).toEqual(['node', 'dist/migrate.js']);
    expect((parseAllDocuments(read('docker-compose.yml'))[0]!.toJSON() as { services: { migrate: { command: string[] } } }).services.migrate.command).toEqual(c.command);
    expect(c.image).toBe(container(byKind(services, 'Deployment', 'svc-gateway')).image);
    expect(template(job).spec.restartPolicy).toBe('Never');
    expect((container(job).env ?? [])[0]?.valueFrom?.secretKeyRef).toEqual({ name: 'svc-secrets', key: 'DATABASE_URL' });
    // The release's images: tagged (never latest), the gateway's and the dispatcher's of one tag.
    const images = [c.image, container(byKind(services, 'Deployment', 'svc-dispatcher')).image];
    const tags = images.map((i) => /:([\w][\w.-]{0,127})$/.exec(i)?.[1]);
    expect(tags.every((t) => t !== undefined && t !== 'latest')).toBe(true);
    expect(new Set(tags).size).toBe(1);
  });
});
