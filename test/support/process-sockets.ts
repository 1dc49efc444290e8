import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * The local ports of a process's TCP connections to `remotePort`, read from Linux's /proc: which of
 * the connections a server on that port sees (by the client's port) belong to that process, e.g. to
 * wait until a dispatcher has requests in a receiver's hands before killing it. The remote port
 * matters: Linux gives one local port to connections to different destinations. Empty when the
 * process is gone.
 */
export function tcpPortsOf(pid: number, remotePort: number): Set<number> {
  const inodes = new Set<string>();
  let fds: string[] = [];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return new Set();
  }
  for (const fd of fds) {
    try {
      const inode = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`))?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // closed meanwhile
    }
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ...
    const toPort = `:${remotePort.toString(16).toUpperCase().padStart(4, '0')} `;
    for (const line of text.split('\n').slice(1)) {
      if (!line.includes(toPort)) continue; // most lines, cheaply
      const cols = line.trim().split(/\s+/);
      const local = cols[1]?.split(':')[1];
      const remote = cols[2]?.split(':')[1];
      if (cols[9] !== undefined && inodes.has(cols[9]) && local && remote && parseInt(remote, 16) === remotePort) ports.add(parseInt(local, 16));
    }
  }
  return ports;
}
