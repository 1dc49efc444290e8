import type { Migration } from 'kysely';
import * as foundation from './20261122080000_foundation';
import * as shipments from './20261122080100_shipments';
import * as webhooks from './20261122080200_webhooks';
import * as reconciliation from './20261123090000_reconciliation';
import * as deliveryLog from './20261123100000_delivery_log';
import * as resendRotation from './20261123120000_resend_rotation';
import * as sandboxParity from './20261124090000_sandbox_parity';
import * as retention from './20261125090000_retention';
import * as webhookVersions from './20261126090000_webhook_versions';
import * as portal from './20261127090000_portal';
import * as activity from './20261127120000_activity';
import * as sealedSecrets from './20261128100000_sealed_secrets';
import * as deliveryLogIndexes from './20261128120000_delivery_log_indexes';
import * as deferredDeliveries from './20261129090000_deferred_deliveries';
import * as queueShards from './20261202080000_queue_shards';
import * as partitions from './20261202090000_partitions';
import * as endpointHealth from './20261202100000_endpoint_health';
import * as listenSessions from './20261202110000_listen_sessions';

/** Every migration by its timestamped name; a static list so bundlers and test runners see them. */
export const migrations: Record<string, Migration> = {
  '20261122080000_foundation': foundation,
  '20261122080100_shipments': shipments,
  '20261122080200_webhooks': webhooks,
  '20261123090000_reconciliation': reconciliation,
  '20261123100000_delivery_log': deliveryLog,
  '20261123120000_resend_rotation': resendRotation,
  '20261124090000_sandbox_parity': sandboxParity,
  '20261125090000_retention': retention,
  '20261126090000_webhook_versions': webhookVersions,
  '20261127090000_portal': portal,
  '20261127120000_activity': activity,
  '20261128100000_sealed_secrets': sealedSecrets,
  '20261128120000_delivery_log_indexes': deliveryLogIndexes,
  '20261129090000_deferred_deliveries': deferredDeliveries,
  '20261202080000_queue_shards': queueShards,
  '20261202090000_partitions': partitions,
  '20261202100000_endpoint_health': endpointHealth,
  '20261202110000_listen_sessions': listenSessions,
};
