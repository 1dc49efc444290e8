// cluster-key-slot ships no types: its one export, the CRC16 hash slot ioredis routes by.
declare module 'cluster-key-slot' {
  /** The Redis Cluster hash slot (0-16383) of a key, honouring its `{hash tag}`. */
  function calculateSlot(key: string): number;
  export = calculateSlot;
}
