import { Link } from 'react-router';
import type { Modo, WebhookRow } from '../api';
import { formatDateTime } from '../format';
import { DataTable } from '../ui';
import { EstadoBadge } from './WebhookHealth';

/** The webhooks of one mode: **URL** (a link to the webhook's page), **Eventos**, **Descripción**, **Estado**, **Última entrega**. */
export function WebhookTable({ rows, modo, label }: { rows: WebhookRow[]; modo: Modo; label: string }) {
  if (rows.length === 0) return <p className="empty">No hay webhooks todavía.</p>;
  return (
    <DataTable label={label} columns={['URL', 'Eventos', 'Descripción', 'Estado', 'Última entrega']}>
      {rows.map((w) => (
        <tr key={w.id}>
          <td className="url">
            <Link to={`/webhooks/${w.id}?modo=${modo}`}>{w.url}</Link>
          </td>
          <td>{w.eventos.length === 0 ? 'Todos' : w.eventos.join(', ')}</td>
          <td>{w.descripcion ?? '—'}</td>
          <td>
            <EstadoBadge salud={w.salud} />
          </td>
          <td>
            {w.ultimoDelivery ? (
              <>
                {w.ultimoDelivery.exitoso ? 'Exitosa' : 'Fallida'} ({w.ultimoDelivery.statusCode}) · {formatDateTime(w.ultimoDelivery.fecha)}
              </>
            ) : (
              'Ninguna'
            )}
          </td>
        </tr>
      ))}
    </DataTable>
  );
}
