import { Type, type TSchema } from '@sinclair/typebox'

/** A field the upstream may give as null: returned as null, key present. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])

export const ErrorBody = Type.Object({ error: Type.String() })
export const FailureBody = Type.Object({ error: Type.String(), details: Type.String() })
export const NotModified = Type.Null({ description: "Not Modified: the caller's If-None-Match matched the current ETag" })

