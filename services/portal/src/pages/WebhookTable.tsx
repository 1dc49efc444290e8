import { Link } from 'react-router';
import type { Modo, WebhookRow } from '../api';
import { formatDateTime } from '../format';
import { DataTable } from '../ui';
import { EstadoBadge } from './WebhookHealth';

/**
 * A webhook's `eventos` as the page shows it: an empty list is every shipment event and no notice, so
 * it is not called plain "Todos"; a list is shown as it is, notices beside shipment events.
 */
export function describeEventos(eventos: readonly string[]): string {
  return eventos.length === 0 ? 'Todos los de guía' : eventos.join(', ');
}

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
          <td>{describeEventos(w.eventos)}</td>
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
