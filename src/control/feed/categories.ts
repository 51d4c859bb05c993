/**
 * Apple Podcasts categories (docs/behaviour.md §9 "Podcasts": `category` is an Apple category name, either
 * `"Technology"` or `"Society & Culture > Documentary"`). Apple's list as of 2024.
 */
export const APPLE_CATEGORIES: Readonly<Record<string, readonly string[]>> = {
  Arts: ['Books', 'Design', 'Fashion & Beauty', 'Food', 'Performing Arts', 'Visual Arts'],
  Business: ['Careers', 'Entrepreneurship', 'Investing', 'Management', 'Marketing', 'Non-Profit'],
  Comedy: ['Comedy Interviews', 'Improv', 'Stand-Up'],
  Education: ['Courses', 'How To', 'Language Learning', 'Self-Improvement'],
  Fiction: ['Comedy Fiction', 'Drama', 'Science Fiction'],
  Government: [],
  History: [],
  'Health & Fitness': ['Alternative Health', 'Fitness', 'Medicine', 'Mental Health', 'Nutrition', 'Sexuality'],
  'Kids & Family': ['Education for Kids', 'Parenting', 'Pets & Animals', 'Stories for Kids'],
  Leisure: ['Animation & Manga', 'Automotive', 'Aviation', 'Crafts', 'Games', 'Hobbies', 'Home & Garden', 'Video Games'],
  Music: ['Music Commentary', 'Music History', 'Music Interviews'],
  News: ['Business News', 'Daily News', 'Entertainment News', 'News Commentary', 'Politics', 'Sports News', 'Tech News'],
  'Religion & Spirituality': ['Buddhism', 'Christianity', 'Hinduism', 'Islam', 'Judaism', 'Religion', 'Spirituality'],
  Science: ['Astronomy', 'Chemistry', 'Earth Sciences', 'Life Sciences', 'Mathematics', 'Natural Sciences', 'Nature', 'Physics', 'Social Sciences'],
  'Society & Culture': ['Documentary', 'Personal Journals', 'Philosophy', 'Places & Travel', 'Relationships'],
  Sports: [
    'Baseball', 'Basketball', 'Cricket', 'Fantasy Sports', 'Football', 'Golf', 'Hockey', 'Rugby', 'Running', 'Soccer', 'Swimming',
    'Tennis', 'Volleyball', 'Wilderness', 'Wrestling',
  ],
  Technology: [],
  'True Crime': [],
  'TV & Film': ['After Shows', 'Film History', 'Film Interviews', 'Film Reviews', 'TV Reviews'],
};

/** `"Society & Culture > Documentary"` → `["Society & Culture", "Documentary"]`; `"Technology"` → `["Technology"]`. */
export function splitCategory(category: string): [string] | [string, string] {
  const parts = category.split('>').map((s) => s.trim());
  return parts.length >= 2 ? [parts[0]!, parts[1]!] : [parts[0]!];
}

/** Whether `category` names an Apple category, optionally with one of its subcategories (exact spelling). */
export function isAppleCategory(category: string): boolean {
  if (category.split('>').length > 2) return false;
  const [top, sub] = splitCategory(category);
  if (!Object.hasOwn(APPLE_CATEGORIES, top)) return false;
  return sub === undefined || APPLE_CATEGORIES[top]!.includes(sub);
}
