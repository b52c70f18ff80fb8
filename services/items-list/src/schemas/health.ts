import { Type } from '@sinclair/typebox'

/** `/health` and `/ready`: `{"status":"ok"}`, `{"status":"ready"}`. */
export const Status = Type.Object({ status: Type.String() })
