import { Module } from '@nestjs/common';
import { CqrsModule } from '@nestjs/cqrs';
import { SessionCommandHandler } from './session-command.handler.js';
import { SessionRepository } from './session-repository.js';
import { SessionsController } from './sessions.controller.js';

@Module({ imports: [CqrsModule], controllers: [SessionsController], providers: [SessionRepository, SessionCommandHandler], exports: [SessionRepository] })
export class SessionsModule {}
