import type { AttemptLog, Delivery, LastAttempt, LoggedDelivery } from './delivery.repository';

// What each read answers: exactly the contract's fields (the webhook detail's and list's), and what
// the delivery log adds to them (docs/integrators.md).

/** The list's `ultimoDelivery`: the outcome of the webhook's latest attempted delivery, or null. */
export function presentLast(last: LastAttempt | undefined) {
  return last ? { exitoso: last.exitoso, statusCode: last.statusCode, fecha: last.fecha.toISOString() } : null;
}

/** A Delivery of the contract (the webhook detail's `entregas`). */
export function presentDelivery(d: Delivery) {
  return {
    id: d.id,
    evento: d.evento,
    exitoso: d.exitoso,
    statusCode: d.statusCode,
    intentos: d.intentos,
    ultimoIntentoEn: d.ultimoIntentoEn ? d.ultimoIntentoEn.toISOString() : null,
    createdAt: d.createdAt.toISOString(),
  };
}

function presentAttempt(a: AttemptLog) {
  return {
    numero: a.numero,
    fecha: a.fecha.toISOString(),
    statusCode: a.statusCode,
    duracionMs: a.duracionMs,
    error: a.error,
    mensaje: a.mensaje,
    respuesta: a.respuesta,
  };
}

/** EntregaDetalle: the Delivery of the contract, and what the log adds. */
export function presentLogged(d: LoggedDelivery, attempts: AttemptLog[]) {
  return {
    ...presentDelivery(d),
    estado: d.estado,
    // A PING has no event: its own id names it.
    eventoId: d.eventoId ?? d.id,
    numeroGuia: d.numeroGuia,
    reenvioDe: d.reenvioDe,
    intentosDetalle: attempts.map(presentAttempt),
  };
}
