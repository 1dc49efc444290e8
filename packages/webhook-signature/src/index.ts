// The receiver kit: sign and verify SVC webhook deliveries (README.md).
export { PREVIOUS_SIGNATURE_HEADER, SIGNATURE_HEADER, sign, verify } from './signature';
export {
  signStandard,
  standardKey,
  standardSecret,
  standardSignatureHeader,
  STANDARD_ID_HEADER,
  STANDARD_SIGNATURE_HEADER,
  STANDARD_TIMESTAMP_HEADER,
} from './standard-webhooks';
export {
  DEFAULT_TOLERANCE_SECONDS,
  verifyDelivery,
  type DeliveryHeaders,
  type DeliveryPayload,
  type RefusedDelivery,
  type VerifiedDelivery,
  type VerifyDeliveryInput,
  type VerifyDeliveryResult,
  type VerifyFailureReason,
  type VerifyScheme,
} from './verify-delivery';
export { handleEvent, type SvcEvent, type SvcEventHandlers, type SvcEventName, type SvcEventOf } from './events';
