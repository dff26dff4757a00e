// The mails a person gets about signing in, in their language (en, nl). The links carry a one-time token
// (./tokens.ts) and start with PUBLIC_URL, never with a request's Host header: whoever asks for a reset mail
// chooses that header, and would get the victim's token sent to a host of theirs.

import type { Locale } from '../user-view.ts';

export interface MailText {
  subject: string;
  text: string;
}

/** The console's page a token link opens. */
export const setPasswordLink = (publicUrl: string, token: string) => `${publicUrl}/#/set-password?token=${token}`;

export function invitationMail(locale: Locale, m: { environment: string; inviter: string; link: string }): MailText {
  if (locale === 'nl') {
    return {
      subject: `Uitnodiging voor ${m.environment}`,
      text:
        `${m.inviter} heeft je toegevoegd aan de omgeving ${m.environment}.\n\n` +
        `Kies hier je wachtwoord (de link werkt één keer, zeven dagen lang):\n${m.link}\n\n` +
        'Verwachtte je deze mail niet, negeer hem dan.',
    };
  }
  return {
    subject: `Invitation to ${m.environment}`,
    text:
      `${m.inviter} added you to the environment ${m.environment}.\n\n` +
      `Choose your password here (the link works once, for seven days):\n${m.link}\n\n` +
      'If you did not expect this mail, ignore it.',
  };
}

export function environmentAddedMail(locale: Locale, m: { environment: string; inviter: string; url: string }): MailText {
  if (locale === 'nl') {
    return {
      subject: `Je bent toegevoegd aan ${m.environment}`,
      text:
        `${m.inviter} heeft je toegevoegd aan de omgeving ${m.environment}.\n\n` +
        `Meld je aan met je wachtwoord zoals altijd en kies de omgeving in de console:\n${m.url}/`,
    };
  }
  return {
    subject: `You were added to ${m.environment}`,
    text:
      `${m.inviter} added you to the environment ${m.environment}.\n\n` +
      `Sign in with your password as before and choose the environment in the console:\n${m.url}/`,
  };
}

export function passwordResetMail(locale: Locale, m: { email: string; link: string }): MailText {
  if (locale === 'nl') {
    return {
      subject: 'Je wachtwoord opnieuw instellen',
      text:
        `Iemand (hopelijk jij) vroeg een nieuw wachtwoord aan voor ${m.email}.\n\n` +
        `Kies het hier (de link werkt één keer, een uur lang):\n${m.link}\n\n` +
        'Was jij het niet, negeer deze mail dan: je wachtwoord blijft wat het was.',
    };
  }
  return {
    subject: 'Reset your password',
    text:
      `Someone (hopefully you) asked for a new password for ${m.email}.\n\n` +
      `Choose it here (the link works once, for one hour):\n${m.link}\n\n` +
      'If it was not you, ignore this mail: your password stays as it is.',
  };
}
