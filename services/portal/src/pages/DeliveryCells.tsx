import { ESTADO_ENTREGA, formatDateTime } from '../format';

/** A delivery row's last four cells, the same in every delivery list: **Estado**, **Intentos**, **Código**, **Fecha**. */
export function DeliveryCells({ d }: { d: { estado: string; intentos: number; statusCode: number; createdAt: string } }) {
  return (
    <>
      <td>
        <span className={`badge badge-${d.estado}`}>{ESTADO_ENTREGA[d.estado]}</span>
      </td>
      <td>{d.intentos}</td>
      <td>{d.intentos === 0 ? '—' : d.statusCode}</td>
      <td>{formatDateTime(d.createdAt)}</td>
    </>
  );
}
