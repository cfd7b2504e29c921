import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Every change to an API key row that can change a verification (revocation, roles, expiry, a
 * new key, a deletion) notifies `api_key_changed` with the key's id, on commit, whoever made
 * it (the service, the CLI, an operator's SQL). Instances cache verified keys and drop the
 * entry when told (decision 0028). `last_used_at` alone changes nothing a verification reads.
 */
export class KeyChangeNotify1763800000280 implements MigrationInterface {
  readonly name = 'KeyChangeNotify1763800000280';

  async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE FUNCTION api_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'UPDATE' AND to_jsonb(NEW) - 'last_used_at' = to_jsonb(OLD) - 'last_used_at' THEN
          RETURN NULL;
        END IF;
        PERFORM pg_notify('api_key_changed', CASE WHEN TG_OP = 'DELETE' THEN OLD.id ELSE NEW.id END);
        RETURN NULL;
      END $$`);
    await queryRunner.query(`
      CREATE TRIGGER api_key_changed AFTER INSERT OR UPDATE OR DELETE ON api_keys
        FOR EACH ROW EXECUTE FUNCTION api_key_changed()`);
  }

  async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER api_key_changed ON api_keys`);
    await queryRunner.query(`DROP FUNCTION api_key_changed()`);
  }
}
