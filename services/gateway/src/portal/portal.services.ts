/**
 * The other features' services the portal drives: the very code paths of `/api/v1` and the internal
 * routes (a token regenerated here is revoked on every gateway as through the internal route, a
 * webhook created here is checked as through the API). One import per feature, so a feature that
 * moves changes one line here.
 */
export * as companies from '../companies/company.service';
export * as webhooks from '../webhooks/webhook.service';
export * as deliveries from '../deliveries/delivery.service';
export * as shipments from '../shipments/shipment.service';
export { tokenPairGeneratedAt } from '../auth/token.repository';
export { listBranches, guatemalaToday } from '../companies/company.repository';
