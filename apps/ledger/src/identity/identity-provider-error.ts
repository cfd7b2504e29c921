/**
 * The provider's discovery document or key set could not be fetched or made no sense. Not the
 * client's fault, so not an AuthenticationError: the guard answers 503 and logs the message.
 */
export class IdentityProviderUnavailableError extends Error {
  override readonly name = 'IdentityProviderUnavailableError';
}
