// PLACEHOLDER: filled in by the shipments work.
import type { Router } from 'express';
import type { GatewayDeps } from '../deps';

export function mountShipmentRoutes(_router: Router, _deps: GatewayDeps): void {}
export function mountShipmentInternalRoutes(_router: Router, _deps: GatewayDeps): void {}
