import type { RedisClient } from './redis';

/**
 * Pub/sub that works on one server and on a Redis Cluster alike: on a cluster the channel is
 * sharded (SSUBSCRIBE/SPUBLISH), so a message stays within the shard that owns the channel's slot
 * instead of PUBLISH's broadcast to every node over the cluster bus. A message is heard only by
 * those listening when it is published: callers that need an answer wait for it with a deadline.
 */

/** Publishes `message` on `channel`. */
export async function publishOn(commands: RedisClient, channel: string, message: string): Promise<void> {
  await (commands.isCluster ? commands.spublish(channel, message) : commands.publish(channel, message));
}

export interface ChannelListener {
  /** Stops hearing the channel. */
  close(): Promise<void>;
}

/** Per subscriber client, the hearers of each channel: one 'message' listener per client, however many channels. */
const hearersOf = new WeakMap<RedisClient, Map<string, Set<(message: string) => void>>>();

function hearers(subscriber: RedisClient): Map<string, Set<(message: string) => void>> {
  let byChannel = hearersOf.get(subscriber);
  if (byChannel === undefined) {
    const map = new Map<string, Set<(message: string) => void>>();
    byChannel = map;
    hearersOf.set(subscriber, map);
    const onMessage = (channel: string, message: string): void => {
      for (const hear of map.get(channel) ?? []) hear(message);
    };
    subscriber.on(subscriber.isCluster ? 'smessage' : 'message', onMessage);
  }
  return byChannel;
}

/**
 * Hears `channel` on `subscriber` (a client of the `subscriber` role, which resubscribes by itself
 * after a reconnect) until the listener is closed.
 */
export async function listenOn(subscriber: RedisClient, channel: string, hear: (message: string) => void): Promise<ChannelListener> {
  const sharded = subscriber.isCluster;
  const byChannel = hearers(subscriber);
  let set = byChannel.get(channel);
  const first = set === undefined;
  if (set === undefined) byChannel.set(channel, (set = new Set()));
  set.add(hear);
  const unsubscribe = async (): Promise<void> => {
    await (sharded ? subscriber.sunsubscribe(channel) : subscriber.unsubscribe(channel)).catch(() => undefined);
  };
  const remove = (): boolean => {
    const current = byChannel.get(channel);
    current?.delete(hear);
    if (current === undefined || current.size > 0) return false;
    byChannel.delete(channel);
    return true;
  };
  if (first) {
    try {
      await (sharded ? subscriber.ssubscribe(channel) : subscriber.subscribe(channel));
    } catch (err) {
      remove();
      throw err;
    }
  }
  return {
    async close() {
      if (remove()) await unsubscribe();
    },
  };
}
