import * as HttpClassify from "@effect-resilience/core/httpClassify"
import { Data, Duration, Effect } from "effect"
import { HttpClient, HttpClientError } from "effect/http"
import type * as Api from "../../../ResilientHttpClient.js"
import type { Fields } from "../../errorFields.js"
import { ConnectFailed, NoResponse } from "../httpErrors.js"

export class OriginPaused extends Data.TaggedError("OriginPaused")<Fields<Api.OriginPaused>> {
  override get message(): string {
    return `${this.origin} asked every caller to hold off for ${Duration.format(this.retryAfter)} more, ` +
      "past this call's deadline"
  }
}

/**
 * Effect 4's client errors carry a `reason`; only a `TransportError` says something about the request's fate:
 * what its cause chain says (a connect failure: never sent), else that it may have run.
 */
export const classifyTransportError = (
  error: HttpClientError.HttpClientError
): HttpClientError.HttpClientError | ConnectFailed | NoResponse => {
  const reason = error.reason
  if (reason._tag !== "TransportError") return error
  const connect = HttpClassify.connectFailureReason(reason.cause)
  return connect !== undefined
    ? new ConnectFailed({ reason: connect, request: reason.request, cause: reason.cause })
    : new NoResponse({ reason: "reset", request: reason.request, cause: reason.cause })
}

/** `classifyTransportError` for any error: what is not an `HttpClientError` is returned as it is. */
export const classifyAny = <E>(error: E): E | ConnectFailed | NoResponse =>
  HttpClientError.isHttpClientError(error) ? classifyTransportError(error) as E | ConnectFailed | NoResponse : error

/** A transport failure of `self` becomes what is known about the request: `ConnectFailed` or `NoResponse`. */
export const classifyTransportErrors = <E, R>(
  self: HttpClient.HttpClient.With<E, R>
): HttpClient.HttpClient.With<E | ConnectFailed | NoResponse, R> =>
  HttpClient.transformResponse(self, Effect.mapError(classifyAny))
