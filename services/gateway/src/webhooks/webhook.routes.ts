// PLACEHOLDER: filled in by the webhooks work.
import type { Router } from 'express';
import type { GatewayDeps } from '../deps';

export function mountWebhookRoutes(_router: Router, _deps: GatewayDeps): void {}
export function mountWebhookInternalRoutes(_router: Router, _deps: GatewayDeps): void {}
