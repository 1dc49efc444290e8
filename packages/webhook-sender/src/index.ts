// PLACEHOLDER until the webhooks work lands: the guarded, signed HTTPS sender.
export type AttemptResult = '2xx' | '3xx' | '4xx' | '5xx' | 'timeout' | 'network' | 'blocked';

export interface SendOutcome {
  ok: boolean;
  /** 0 when no HTTP status came back. */
  statusCode: number;
  durationMs: number;
  result: AttemptResult;
}

export interface WebhookSender {
  send(url: string, body: string, headers: Record<string, string>): Promise<SendOutcome>;
  close(): Promise<void>;
}

export interface SenderOptions {
  hostMap: string;
  allowCidrs: string;
  timeoutMs?: number;
}

export function createWebhookSender(_options: SenderOptions): WebhookSender {
  return {
    send: () => Promise.reject(new Error('webhook sender not built yet')),
    close: () => Promise.resolve(),
  };
}
export * from './entrega.repository';
